//! The one list of everything a slash names (crush(1) SKILLS AND COMMANDS): custom
//! commands, user-invocable skills and the MCP servers' prompts; what a typed name means (the
//! interactive session's built-in commands first, then project commands, user commands,
//! skills and MCP prompts: a full name such as `project:review`, the bare name `review` when
//! it is unique at the first level that has it, or in the interactive session a unique prefix
//! of either); and the prompt an entry sends with its arguments.

use super::commands::{Command, Commands, Dialect, placeholders};
use super::{Skill, SkillError, Skills, Source};
use serde_json::{Value as Json, json};

/// `text` with `$ARGUMENTS` replaced by `rest` and each `$NAME` of `values` by its value.
/// Without a `$ARGUMENTS`, a non-empty `rest` is appended after a blank line.
pub(crate) fn expand(text: &str, values: &[(String, String)], rest: &str) -> String {
    let mut out = String::with_capacity(text.len() + rest.len());
    let mut last = 0;
    let mut used_rest = false;
    for (name, at) in placeholders(text) {
        let value = if name == "ARGUMENTS" {
            used_rest = true;
            Some(rest)
        } else {
            values
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        if let Some(v) = value {
            out.push_str(&text[last..at]);
            out.push_str(v);
            last = at + 1 + name.len();
        }
    }
    out.push_str(&text[last..]);
    let rest = rest.trim();
    if !used_rest && !rest.is_empty() {
        out = format!("{}\n\n{rest}", out.trim_end());
    }
    out
}

/// A piece of a Claude Code command's prompt: text, or a `` !`cmd` `` whose output goes there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Segment {
    Text(String),
    Shell(String),
}

/// The `` !`cmd` `` of `text` (a `!` at the start of a line or after whitespace, then a command
/// between backticks on one line): (start, end, command), in order.
fn shell_spans(text: &str) -> Vec<(usize, usize, &str)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < b.len() {
        let starts = b[i] == b'!' && b[i + 1] == b'`' && (i == 0 || b[i - 1].is_ascii_whitespace());
        if starts && let Some(len) = text[i + 2..].find(['`', '\n']) {
            let end = i + 2 + len;
            if b[end] == b'`' && !text[i + 2..end].trim().is_empty() {
                out.push((i, end + 1, &text[i + 2..end]));
                i = end + 1;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// `text` with Claude Code's arguments in place: `$ARGUMENTS` the whole line as typed (`raw`),
/// `$ARGUMENTS[N]` the word N (from 0), `$1`, `$2`… the words from 1 (empty when not given);
/// any other `$WORD` stays as it is. Whether a placeholder was met.
fn claude_arguments(text: &str, words: &[String], raw: &str) -> (String, bool) {
    let word = |n: usize| words.get(n).map_or("", String::as_str);
    let mut out = String::with_capacity(text.len() + raw.len());
    let mut used = false;
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            used = true;
            let index = tail
                .strip_prefix('[')
                .and_then(|t| t.split_once(']'))
                .and_then(|(n, t)| Some((n.parse::<usize>().ok()?, t)));
            match index {
                Some((n, t)) => {
                    out.push_str(word(n));
                    rest = t;
                }
                None => {
                    out.push_str(raw.trim());
                    rest = tail;
                }
            }
        } else if digits > 0 && !after.starts_with('0') {
            used = true;
            let n: usize = after[..digits].parse().unwrap_or(usize::MAX);
            out.push_str(word(n.saturating_sub(1)));
            rest = &after[digits..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    (out, used)
}

/// A Claude Code command's prompt (crush(1) SKILLS AND COMMANDS, Custom commands): its text and
/// its `` !`cmd` `` commands, with the arguments in place in both (the commands are found in
/// the file's text, so an argument never adds one). Without a placeholder, a non-empty line is
/// appended as `ARGUMENTS: …`, as Claude Code does.
pub(crate) fn expand_claude(body: &str, words: &[String], raw: &str) -> Vec<Segment> {
    let mut segs = Vec::new();
    let mut used = false;
    let mut last = 0;
    let mut push = |segs: &mut Vec<Segment>, piece: &str, shell: bool| {
        let (t, u) = claude_arguments(piece, words, raw);
        used |= u;
        segs.push(if shell {
            Segment::Shell(t)
        } else {
            Segment::Text(t)
        });
    };
    for (start, end, cmd) in shell_spans(body) {
        push(&mut segs, &body[last..start], false);
        push(&mut segs, cmd, true);
        last = end;
    }
    push(&mut segs, &body[last..], false);
    if !used && !raw.trim().is_empty() {
        segs.push(Segment::Text(format!("\n\nARGUMENTS: {}", raw.trim())));
    }
    segs
}

/// The prompt of `segments`, each command's output (from `run`) in its place.
pub(crate) fn join_segments<E>(
    segments: &[Segment],
    run: &mut dyn FnMut(&str) -> Result<String, E>,
) -> Result<String, E> {
    let mut out = String::new();
    for s in segments {
        match s {
            Segment::Text(t) => out.push_str(t),
            Segment::Shell(cmd) => out.push_str(run(cmd)?.trim_end_matches('\n')),
        }
    }
    Ok(out.trim().to_string())
}

/// The level of a name: earlier levels win a clash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Tier {
    ProjectCommand,
    UserCommand,
    Skill,
    McpPrompt,
}

/// What a name in the list stands for.
#[derive(Clone, Debug)]
pub(crate) enum Kind<'a> {
    Command(&'a Command),
    Skill(&'a Skill),
    Mcp(crate::mcp::Prompt),
}

/// One entry of the list.
#[derive(Clone, Debug)]
pub(crate) struct Entry<'a> {
    /// `project:review`, `user:my-skill`, `mcp:SERVER:PROMPT`.
    pub name: String,
    /// The name without its first part: `review`, `my-skill`, `PROMPT`.
    pub bare: String,
    pub tier: Tier,
    pub kind: Kind<'a>,
}

/// A name of the list and its level, for resolving and completing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Name {
    pub full: String,
    pub bare: String,
    pub tier: Tier,
}

/// Commands, user-invocable skills and MCP prompts, in one list.
#[derive(Clone, Debug, Default)]
pub(crate) struct Catalog<'a> {
    pub entries: Vec<Entry<'a>>,
}

fn bare_of(full: &str) -> String {
    full.split_once(':')
        .map(|(_, b)| b.to_string())
        .unwrap_or_else(|| full.to_string())
}

impl<'a> Catalog<'a> {
    pub(crate) fn new(
        commands: &'a Commands,
        skills: &'a Skills,
        mcp: Vec<crate::mcp::Prompt>,
    ) -> Self {
        let mut entries = Vec::new();
        for c in &commands.commands {
            entries.push(Entry {
                name: c.name.clone(),
                bare: bare_of(&c.name),
                tier: if c.source == Source::Project {
                    Tier::ProjectCommand
                } else {
                    Tier::UserCommand
                },
                kind: Kind::Command(c),
            });
        }
        for s in skills.active().into_iter().filter(|s| s.user_invocable) {
            let name = format!("{}:{}", s.source.label(), s.name);
            if entries.iter().any(|e| e.name == name) {
                continue;
            }
            entries.push(Entry {
                name,
                bare: s.name.clone(),
                tier: Tier::Skill,
                kind: Kind::Skill(s),
            });
        }
        for p in mcp {
            entries.push(Entry {
                name: format!("mcp:{}:{}", p.server, p.name),
                bare: p.name.clone(),
                tier: Tier::McpPrompt,
                kind: Kind::Mcp(p),
            });
        }
        Catalog { entries }
    }

    pub(crate) fn names(&self) -> Vec<Name> {
        self.entries
            .iter()
            .map(|e| Name {
                full: e.name.clone(),
                bare: e.bare.clone(),
                tier: e.tier,
            })
            .collect()
    }

    pub(crate) fn get(&self, full: &str) -> Option<&Entry<'a>> {
        self.entries.iter().find(|e| e.name == full)
    }
}

/// Optimal string alignment distance: insertions, deletions, substitutions and transpositions
/// of adjacent characters each cost one.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let (n, m) = (a.len(), b.len());
    let mut d = vec![vec![0usize; m + 1]; n + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=n {
        for j in 1..=m {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[n][m]
}

/// A slash word that is a path, not a name (`/usr/bin/foo` after its first slash): it holds
/// another `/`, which no command, skill or MCP prompt name does. Such a prompt is sent as text.
pub(crate) fn is_path(word: &str) -> bool {
    word.contains('/')
}

/// Up to three of `names` a mistyped slash name was likely meant to be, closest first: one it
/// starts (`git:commit` for `git:commit-all`), one that starts it (`sessionsx`), or one a few
/// edits away (one edit for a short name, two from four characters), compared whole and by the
/// part after the last `:`.
pub(crate) fn near<'n>(typed: &str, names: impl IntoIterator<Item = &'n str>) -> Vec<String> {
    let t = typed.to_ascii_lowercase();
    let limit = if t.chars().count() >= 4 { 2 } else { 1 };
    let score = |n: &str| -> usize {
        let n = n.to_ascii_lowercase();
        // The name, and each tail after a `:` (`git:commit` and `commit` of `project:git:commit`).
        let tails =
            std::iter::once(n.as_str()).chain(n.match_indices(':').map(|(i, _)| &n[i + 1..]));
        let len = t.chars().count();
        let mut d = usize::MAX;
        for whole in tails {
            d = d.min(edit_distance(&t, whole));
            if t.starts_with(whole) {
                d = d.min(t.len() - whole.len());
            }
            // A start typed, or mistyped: `git:comit` for `git:commit-all`.
            for k in len.saturating_sub(1)..=len + 1 {
                let start: String = whole.chars().take(k).collect();
                if len >= 3 && start.chars().count() < whole.chars().count() {
                    d = d.min(edit_distance(&t, &start) + 1);
                }
            }
        }
        d
    };
    let mut scored: Vec<(usize, String)> = Vec::new();
    for n in names {
        let d = score(n);
        if d <= limit && !scored.iter().any(|(_, m)| m == n) {
            scored.push((d, n.to_string()));
        }
    }
    scored.sort();
    scored.into_iter().take(3).map(|(_, n)| n).collect()
}

/// What a typed name means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Resolution {
    /// A built-in command of the interactive session (its name).
    Builtin(String),
    /// An entry of the list (its full name).
    Entry(String),
    /// Several candidates (slash names, sorted).
    Ambiguous(Vec<String>),
    Unknown,
}

/// What `word` (a slash name without its slash) names: a built-in command (case-insensitive),
/// a full name, a bare name (the first level that has it wins; two at that level are
/// ambiguous), or, with `prefixes`, a unique prefix of any of these.
pub(crate) fn resolve(word: &str, names: &[Name], builtins: &[&str], prefixes: bool) -> Resolution {
    let lower = word.to_ascii_lowercase();
    if let Some(b) = builtins.iter().find(|b| **b == lower) {
        return Resolution::Builtin(b.to_string());
    }
    if let Some(n) = names.iter().find(|n| n.full == word) {
        return Resolution::Entry(n.full.clone());
    }
    if let Some(r) = by_bare(word, names) {
        return r;
    }
    if !prefixes || word.is_empty() {
        return Resolution::Unknown;
    }
    // A prefix: of a built-in, of a full name, or of a bare name (which stands for what the
    // bare name itself would resolve to).
    let mut hits: Vec<String> = Vec::new();
    let mut add = |slash: String| {
        if !hits.contains(&slash) {
            hits.push(slash);
        }
    };
    for b in builtins.iter().filter(|b| b.starts_with(&lower)) {
        add(format!("/{b}"));
    }
    for n in names {
        if n.full.starts_with(word) {
            add(format!("/{}", n.full));
        }
        if n.bare.starts_with(word) {
            match by_bare(&n.bare, names) {
                Some(Resolution::Entry(full)) => add(format!("/{full}")),
                Some(Resolution::Ambiguous(list)) => list.into_iter().for_each(&mut add),
                _ => {}
            }
        }
    }
    match hits.as_slice() {
        [] => Resolution::Unknown,
        [one] => match one.trim_start_matches('/') {
            b if builtins.contains(&b) => Resolution::Builtin(b.to_string()),
            full => Resolution::Entry(full.to_string()),
        },
        _ => {
            hits.sort();
            Resolution::Ambiguous(hits)
        }
    }
}

/// What the bare name `word` names: the entry of the first level that has it (two there are
/// ambiguous); None when no entry has it.
fn by_bare(word: &str, names: &[Name]) -> Option<Resolution> {
    let bare: Vec<&Name> = names.iter().filter(|n| n.bare == word).collect();
    let top = bare.iter().map(|n| n.tier).min()?;
    let at_top: Vec<&&Name> = bare.iter().filter(|n| n.tier == top).collect();
    Some(match at_top.as_slice() {
        [one] => Resolution::Entry(one.full.clone()),
        many => {
            let mut list: Vec<String> = many.iter().map(|n| format!("/{}", n.full)).collect();
            list.sort();
            Resolution::Ambiguous(list)
        }
    })
}

/// The arguments an entry was given: named values, and the rest of the line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bound {
    pub values: Vec<(String, String)>,
    pub rest: String,
    /// The words that bound no named argument (Claude Code's `$1`, `$2`…).
    pub words: Vec<String>,
}

impl Entry<'_> {
    /// The arguments to ask for when missing: (name, required).
    pub(crate) fn arguments(&self) -> Vec<(String, bool)> {
        match &self.kind {
            Kind::Command(c) => c.arguments.iter().map(|a| (a.clone(), true)).collect(),
            Kind::Skill(_) => Vec::new(),
            Kind::Mcp(p) => p
                .arguments
                .iter()
                .map(|(n, required, _)| (n.clone(), *required))
                .collect(),
        }
    }

    /// The entry as `/help` shows it: its name and arguments.
    pub(crate) fn usage(&self) -> String {
        let args: Vec<String> = match &self.kind {
            Kind::Command(c) => match &c.argument_hint {
                Some(h) => vec![h.clone()],
                None => c.arguments.iter().map(|a| format!("{a}=…")).collect(),
            },
            Kind::Skill(_) => vec!["[TEXT]".to_string()],
            Kind::Mcp(p) => p
                .arguments
                .iter()
                .map(|(n, required, _)| {
                    if *required {
                        n.to_uppercase()
                    } else {
                        format!("[{}]", n.to_uppercase())
                    }
                })
                .collect(),
        };
        format!("/{} {}", self.name, args.join(" "))
            .trim_end()
            .to_string()
    }

    /// How the entry runs in a sub-agent, when its frontmatter says `context: fork` (crush(1)
    /// SKILLS AND COMMANDS, Forked skills).
    pub(crate) fn fork(&self) -> Option<&super::fork::Fork> {
        match &self.kind {
            Kind::Command(c) => c.fork.as_ref(),
            Kind::Skill(s) => s.fork.as_ref(),
            Kind::Mcp(_) => None,
        }
    }

    /// Whether missing arguments are asked for (a custom command's named arguments); an MCP
    /// prompt's missing ones are an error.
    pub(crate) fn asks(&self) -> bool {
        matches!(self.kind, Kind::Command(_))
    }

    pub(crate) fn description(&self) -> &str {
        match &self.kind {
            Kind::Command(c) => &c.description,
            Kind::Skill(s) => &s.description,
            Kind::Mcp(p) => &p.description,
        }
    }

    /// Binds the words typed after the name (split as a shell would): `NAME=value` for a
    /// named argument; for an MCP prompt, other words fill its arguments in order; the rest is
    /// `$ARGUMENTS`.
    pub(crate) fn bind(&self, args: &str) -> Result<Bound, SkillError> {
        let words = match crate::config::commands::split_words(args) {
            Ok(w) => w,
            // Unbalanced quotes: the line is text, not arguments.
            Err(_) if !matches!(self.kind, Kind::Mcp(_)) => {
                return Ok(Bound {
                    values: Vec::new(),
                    rest: args.trim().to_string(),
                    words: args.split_whitespace().map(str::to_string).collect(),
                });
            }
            Err(e) => return Err(SkillError::Words(e)),
        };
        self.bind_words(words, args)
    }

    /// [`bind`](Self::bind) with the words already split; `raw` is the rest of the line as
    /// typed (what `$ARGUMENTS` receives when no named argument was given).
    pub(crate) fn bind_words(&self, words: Vec<String>, raw: &str) -> Result<Bound, SkillError> {
        let known = self.arguments();
        let mut bound = Bound::default();
        let mut others: Vec<String> = Vec::new();
        for w in words {
            match w.split_once('=') {
                Some((k, v)) if known.iter().any(|(n, _)| n == k) => {
                    bound.values.retain(|(n, _)| n != k);
                    bound.values.push((k.to_string(), v.to_string()));
                }
                _ => others.push(w),
            }
        }
        if let Kind::Mcp(p) = &self.kind {
            for w in others {
                let Some((n, _)) = known
                    .iter()
                    .find(|(n, _)| !bound.values.iter().any(|(b, _)| b == n))
                else {
                    return Err(SkillError::Usage(format!(
                        "/{} takes no more than {} argument(s)",
                        self.name,
                        p.arguments.len()
                    )));
                };
                bound.values.push((n.clone(), w));
            }
            return Ok(bound);
        }
        bound.rest = if bound.values.is_empty() {
            raw.trim().to_string()
        } else {
            others.join(" ")
        };
        bound.words = others;
        Ok(bound)
    }

    /// The required arguments `bound` lacks.
    pub(crate) fn missing(&self, bound: &Bound) -> Vec<String> {
        self.arguments()
            .into_iter()
            .filter(|(n, required)| *required && !bound.values.iter().any(|(b, _)| b == n))
            .map(|(n, _)| n)
            .collect()
    }

    /// A Claude Code command's prompt in pieces when it has `` !`cmd` `` commands to run
    /// first (`join_segments`); None for anything else, whose prompt is [`render`](Self::render)'s.
    pub(crate) fn shell_segments(&self, bound: &Bound) -> Option<Vec<Segment>> {
        match &self.kind {
            Kind::Command(c) if c.dialect == Dialect::Claude => {
                let segs = expand_claude(&c.body, &bound.words, &bound.rest);
                segs.iter()
                    .any(|s| matches!(s, Segment::Shell(_)))
                    .then_some(segs)
            }
            _ => None,
        }
    }

    /// The prompt the entry sends. An MCP prompt is fetched from its server (`mcp`). A Claude
    /// Code command's `` !`cmd` `` are left as written here (see `shell_segments`).
    pub(crate) fn render(
        &self,
        bound: &Bound,
        mcp: Option<&crate::mcp::Manager>,
    ) -> Result<String, SkillError> {
        match &self.kind {
            Kind::Command(c) if c.dialect == Dialect::Claude => {
                let segs = expand_claude(&c.body, &bound.words, &bound.rest);
                let mut literal =
                    |cmd: &str| Ok::<_, std::convert::Infallible>(format!("!`{cmd}`"));
                Ok(match join_segments(&segs, &mut literal) {
                    Ok(t) => t,
                    Err(never) => match never {},
                })
            }
            Kind::Command(c) => Ok(expand(&c.body, &bound.values, &bound.rest)
                .trim()
                .to_string()),
            Kind::Skill(s) => Ok(invocation(s, &bound.words, &bound.rest)),
            Kind::Mcp(p) => {
                let Some(m) = mcp else {
                    return Err(SkillError::Prompt("this session has no MCP servers".into()));
                };
                let values: serde_json::Map<String, Json> = bound
                    .values
                    .iter()
                    .map(|(k, v)| (k.clone(), json!(v)))
                    .collect();
                let messages = m.get_prompt(&p.server, &p.name, values)?;
                // As Go Crush: the text of the user messages.
                let text: Vec<&str> = messages
                    .iter()
                    .filter(|m| m["role"] == "user")
                    .filter_map(|m| m["content"]["text"].as_str())
                    .collect();
                if text.is_empty() {
                    return Err(SkillError::Prompt(format!(
                        "the prompt '{}' of MCP server '{}' is empty",
                        p.name, p.server
                    )));
                }
                Ok(text.join("\n\n"))
            }
        }
    }
}

/// What `crush run`'s first word `/NAME` names (crush(1) SKILLS AND COMMANDS), with its
/// arguments bound: `words` are the words after the name, `raw` the rest as typed. Only full
/// and bare names count (no prefixes); Ok(None): it names nothing, so it is a prompt. Err (a
/// usage error): the name is ambiguous, or named arguments are missing (nobody can be asked).
pub(crate) fn for_run<'c, 'a>(
    cat: &'c Catalog<'a>,
    name: &str,
    words: Vec<String>,
    raw: &str,
) -> Result<Option<(&'c Entry<'a>, Bound)>, SkillError> {
    let full = match resolve(name, &cat.names(), &[], false) {
        Resolution::Entry(full) => full,
        Resolution::Ambiguous(list) => {
            return Err(SkillError::Usage(format!(
                "/{name} is ambiguous: it could be {}",
                list.join(", ")
            )));
        }
        Resolution::Builtin(_) | Resolution::Unknown => return Ok(None),
    };
    let Some(entry) = cat.get(&full) else {
        return Ok(None);
    };
    let bound = entry.bind_words(words, raw)?;
    let missing = entry.missing(&bound);
    if !missing.is_empty() {
        let how = if entry.asks() {
            "pass each as NAME=value after the command"
        } else {
            "pass them as NAME=value or in order"
        };
        return Err(SkillError::Usage(format!(
            "/{full} needs {}: {how}",
            missing.join(", ")
        )));
    }
    Ok(Some((entry, bound)))
}

/// The message a skill invoked as a command sends: its instructions, with the user's words at
/// their `$ARGUMENTS`, `$ARGUMENTS[N]` or `$N` (as Claude Code fills a skill's placeholders),
/// or after the instructions when they have none.
pub(crate) fn invocation(s: &Skill, words: &[String], rest: &str) -> String {
    let (instructions, used) = claude_arguments(&s.instructions, words, rest);
    let mut out = format!(
        "<loaded_skill>\n<name>{}</name>\n<description>{}</description>\n<location>{}</location>\n<instructions>\n{}\n</instructions>\n</loaded_skill>",
        super::escape(&s.name),
        super::escape(&s.description),
        super::escape(&s.location),
        instructions
    );
    if !used && !rest.trim().is_empty() {
        out.push_str("\n\n");
        out.push_str(rest.trim());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_transpositions_once() {
        assert_eq!(edit_distance("help", "help"), 0);
        assert_eq!(edit_distance("hlep", "help"), 1);
        assert_eq!(edit_distance("mdoel", "model"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn near_names_are_prefixes_or_a_few_edits_away() {
        let names = ["git:commit-all", "project:review", "help"];
        assert_eq!(near("git:commit", names), ["git:commit-all"]);
        assert_eq!(near("reviwe", names), ["project:review"]);
        assert_eq!(near("hepl", names), ["help"]);
        assert_eq!(near("git:comit", names), ["git:commit-all"]);
        assert!(near("zzzz", names).is_empty());
    }

    fn name(full: &str, tier: Tier) -> Name {
        let bare = match full.strip_prefix("mcp:") {
            Some(rest) => rest.split_once(':').map_or(rest, |(_, p)| p).to_string(),
            None => bare_of(full),
        };
        Name {
            full: full.into(),
            bare,
            tier,
        }
    }

    #[test]
    fn expansion_of_named_arguments_and_the_rest() {
        let t = "Review $FILE for $FOCUS.\n$ARGUMENTS\n$FILE again, $HOME_DIR, $lower, $9, cost $5";
        let values = vec![
            ("FILE".to_string(), "a.rs".to_string()),
            ("FOCUS".to_string(), "errors".to_string()),
        ];
        assert_eq!(
            expand(t, &values, "be brief"),
            "Review a.rs for errors.\nbe brief\na.rs again, $HOME_DIR, $lower, $9, cost $5"
        );
        assert_eq!(expand("Fix it.", &[], " now "), "Fix it.\n\nnow");
        assert_eq!(expand("Fix $FILEX.", &values, ""), "Fix $FILEX.");
    }

    #[test]
    fn claude_code_arguments_and_shell_lines() {
        let words: Vec<String> = vec!["alpine:3".into(), "two words".into()];
        let body = "FROM $1\nENV PATH=/x:$PATH\nHOME is $HOME, cost $5, $0, $ARGUMENTS[1]\nFiles: !`ls $1` and `code` x!`no`\n!`git status`\nAll: $ARGUMENTS";
        let segs = expand_claude(body, &words, "alpine:3 \"two words\"");
        assert_eq!(
            segs,
            vec![
                Segment::Text("FROM alpine:3\nENV PATH=/x:$PATH\nHOME is $HOME, cost , $0, two words\nFiles: ".into()),
                Segment::Shell("ls alpine:3".into()),
                Segment::Text(" and `code` x!`no`\n".into()),
                Segment::Shell("git status".into()),
                Segment::Text("\nAll: alpine:3 \"two words\"".into()),
            ]
        );
        // An argument never adds a command; without a placeholder the line is appended.
        let segs = expand_claude("Review.", &["!`rm`".into()], "!`rm`");
        assert_eq!(
            segs,
            vec![
                Segment::Text("Review.".into()),
                Segment::Text("\n\nARGUMENTS: !`rm`".into())
            ]
        );
        let mut run = |c: &str| Ok::<_, String>(format!("<{c}>\n"));
        let joined = join_segments(&expand_claude("a !`x` b", &[], ""), &mut run).unwrap();
        assert_eq!(joined, "a <x> b");
        let mut refuse = |c: &str| Err::<String, _>(format!("no {c}"));
        assert_eq!(
            join_segments(&expand_claude("!`x`", &[], ""), &mut refuse),
            Err("no x".into())
        );
    }

    #[test]
    fn precedence_bare_names_and_prefixes() {
        let names = vec![
            name("project:review", Tier::ProjectCommand),
            name("user:review", Tier::UserCommand),
            name("user:deploy", Tier::UserCommand),
            name("project:help", Tier::ProjectCommand),
            name("user:lint", Tier::UserCommand),
            name("project:lint", Tier::Skill),
            name("mcp:a:summary", Tier::McpPrompt),
            name("mcp:b:summary", Tier::McpPrompt),
        ];
        let builtins = ["help", "resume", "quit"];
        let r = |w: &str| resolve(w, &names, &builtins, true);
        assert_eq!(r("help"), Resolution::Builtin("help".into()));
        assert_eq!(r("HELP"), Resolution::Builtin("help".into()));
        assert_eq!(r("project:help"), Resolution::Entry("project:help".into()));
        assert_eq!(r("review"), Resolution::Entry("project:review".into()));
        assert_eq!(r("user:review"), Resolution::Entry("user:review".into()));
        // A user command comes before a skill of the same name.
        assert_eq!(r("lint"), Resolution::Entry("user:lint".into()));
        assert_eq!(
            r("summary"),
            Resolution::Ambiguous(vec!["/mcp:a:summary".into(), "/mcp:b:summary".into()])
        );
        assert_eq!(r("dep"), Resolution::Entry("user:deploy".into()));
        // A prefix of a bare name stands for what the bare name means.
        assert_eq!(r("rev"), Resolution::Entry("project:review".into()));
        assert_eq!(
            r("re"),
            Resolution::Ambiguous(vec!["/project:review".into(), "/resume".into()])
        );
        assert_eq!(
            r("user:"),
            Resolution::Ambiguous(vec![
                "/user:deploy".into(),
                "/user:lint".into(),
                "/user:review".into()
            ])
        );
        assert_eq!(r("res"), Resolution::Builtin("resume".into()));
        assert_eq!(r("zzz"), Resolution::Unknown);
        assert_eq!(
            resolve("dep", &names, &builtins, false),
            Resolution::Unknown
        );
    }

    #[test]
    fn a_skill_invoked_with_words_puts_them_at_its_arguments_placeholder() {
        let text = "---\nname: fix-issue\ndescription: Fix an issue\n---\nFix issue $ARGUMENTS[0] ($1) in full: $ARGUMENTS.\n";
        let s = crate::skills::parse_skill(
            text,
            "SKILL.md".into(),
            crate::skills::Source::User,
            "fix-issue",
        )
        .expect("a skill");
        let words = vec!["123".to_string(), "fast".to_string()];
        let msg = invocation(&s, &words, "123 fast");
        assert!(
            msg.contains("Fix issue 123 (123) in full: 123 fast."),
            "{msg}"
        );
        assert!(
            msg.ends_with("</loaded_skill>"),
            "the words are not appended again: {msg}"
        );
        // Without a placeholder the words come after the instructions.
        let plain = crate::skills::parse_skill(
            "Just do it.\n",
            "SKILL.md".into(),
            crate::skills::Source::User,
            "plain",
        )
        .expect("a skill");
        assert!(invocation(&plain, &words, "123 fast").ends_with("</loaded_skill>\n\n123 fast"));
    }
}
