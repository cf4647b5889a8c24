//! Glob matching, `.gitignore`/`.crushignore` rules and a directory walk that honours them.
//!
//! Globs: `*` (any run within one path segment), `**` (any number of segments), `?`, `[...]`
//! (ranges, `!`/`^` negation), `\` escapes; `{a,b}` alternatives via `expand_braces`.
//! Ignore files: `#` comments, `!` negation, trailing `/` for directories only, a leading or inner
//! `/` anchors the pattern to the file's directory, otherwise it matches at any depth. Files are
//! read per directory; deeper files and later lines win. `.git` is always skipped.

use std::collections::{HashMap, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};
use std::rc::Rc;

pub(crate) const IGNORE_FILES: &[&str] = &[".gitignore", ".crushignore"];

fn match_class(p: &[char], c: char) -> Option<(bool, usize)> {
    // p starts after '['; returns (matched, chars consumed including ']')
    let mut i = 0;
    let negate = matches!(p.first(), Some('!' | '^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while i < p.len() {
        let ch = p[i];
        if ch == ']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        let (lo, step) = if ch == '\\' && i + 1 < p.len() {
            (p[i + 1], 2)
        } else {
            (ch, 1)
        };
        if i + step + 1 < p.len() && p[i + step] == '-' && p[i + step + 1] != ']' {
            let hi = p[i + step + 1];
            if lo <= c && c <= hi {
                matched = true;
            }
            i += step + 2;
        } else {
            if lo == c {
                matched = true;
            }
            i += step;
        }
    }
    None
}

/// One position of a compiled glob: what the rest of the pattern from here does.
#[derive(Clone, Debug)]
enum Node {
    /// `**` ending the pattern: anything left matches.
    AnyRest,
    /// `**/` with the position after the `/`: zero or more whole directories.
    Dirs(usize),
    /// `*`: a run of characters other than `/`.
    Star,
    /// `**` not followed by `/`: behaves as the `*` at this position.
    Alias(usize),
    /// `?`: one character other than `/`.
    One,
    /// `[...]`: the class text starts at the position after `[`; `usize` is its length
    /// including `]`.
    Class(usize),
    /// A literal character and the position after it (`\x` escapes included).
    Lit(char, usize),
    /// The end of the pattern.
    End,
}

/// A glob compiled once and matched in O(pattern × path) time by simulating all positions at
/// once (no backtracking, so patterns such as `*a*a*a*a*b` cannot take exponential time).
#[derive(Clone, Debug)]
pub(crate) struct Glob {
    chars: Vec<char>,
    nodes: Vec<Node>,
}

impl Glob {
    pub(crate) fn new(pattern: &str) -> Glob {
        let p: Vec<char> = pattern.chars().collect();
        let mut nodes = Vec::with_capacity(p.len() + 1);
        for i in 0..=p.len() {
            let node = match p.get(i) {
                None => Node::End,
                Some('*') if p.get(i + 1) == Some(&'*') => {
                    let mut k = i;
                    while p.get(k) == Some(&'*') {
                        k += 1;
                    }
                    match p.get(k) {
                        None => Node::AnyRest,
                        Some('/') => Node::Dirs(k + 1),
                        Some(_) => Node::Alias(k - 1),
                    }
                }
                Some('*') => Node::Star,
                Some('?') => Node::One,
                Some('[') => match class_len(&p[i + 1..]) {
                    Some(used) => Node::Class(used),
                    // An unterminated class is a literal '['.
                    None => Node::Lit('[', i + 1),
                },
                Some('\\') if i + 1 < p.len() => Node::Lit(p[i + 1], i + 2),
                Some(&c) => Node::Lit(c, i + 1),
            };
            nodes.push(node);
        }
        Glob { chars: p, nodes }
    }

    /// Whether the '/'-separated relative `path` matches (whole path).
    pub(crate) fn matches(&self, path: &str) -> bool {
        let n = self.nodes.len();
        // States 0..n are pattern positions; n + i is "inside `**/` at i, waiting for a `/`".
        let mut cur = vec![false; 2 * n];
        let mut next = vec![false; 2 * n];
        cur[0] = true;
        if self.close(&mut cur) {
            return true;
        }
        for c in path.chars() {
            next.iter_mut().for_each(|b| *b = false);
            let mut any = false;
            for (i, node) in self.nodes.iter().enumerate() {
                if cur[n + i] {
                    // waiting inside `**/`: skip any character, a '/' ends a directory
                    next[n + i] = true;
                    any = true;
                    if c == '/'
                        && let Node::Dirs(after) = node
                    {
                        next[*after] = true;
                    }
                }
                if !cur[i] {
                    continue;
                }
                let target = match node {
                    Node::Star if c != '/' => Some(i),
                    Node::One if c != '/' => Some(i + 1),
                    Node::Class(used) if c != '/' => match_class(&self.chars[i + 1..], c)
                        .filter(|(ok, _)| *ok)
                        .map(|_| i + 1 + used),
                    Node::Lit(l, after) if *l == c => Some(*after),
                    _ => None,
                };
                if let Some(t) = target {
                    next[t] = true;
                    any = true;
                }
            }
            if !any {
                return false;
            }
            std::mem::swap(&mut cur, &mut next);
            if self.close(&mut cur) {
                return true;
            }
        }
        cur[n - 1]
    }

    /// Adds the positions reachable without consuming a character (they all lie further right,
    /// so one ascending pass suffices). True when `**` at the end is reached: everything matches.
    fn close(&self, set: &mut [bool]) -> bool {
        let n = self.nodes.len();
        for i in 0..n {
            if !set[i] {
                continue;
            }
            match self.nodes[i] {
                Node::AnyRest => return true,
                Node::Dirs(after) => {
                    set[after] = true;
                    set[n + i] = true;
                }
                Node::Star => set[i + 1] = true,
                Node::Alias(star) => set[star] = true,
                _ => {}
            }
        }
        false
    }
}

/// The length of the class text `p` (after `[`) up to and including its `]`, None when it is
/// not terminated.
fn class_len(p: &[char]) -> Option<usize> {
    match_class(p, '\0').map(|(_, used)| used)
}

/// Whether the '/'-separated relative `path` matches the glob `pattern` (whole path).
#[cfg(test)]
fn glob_match(pattern: &str, path: &str) -> bool {
    Glob::new(pattern).matches(path)
}

/// At most this many alternatives come out of `expand_braces` (`{a,b}{a,b}...` doubles per
/// group); the rest are dropped.
pub(crate) const MAX_BRACE_ALTERNATIVES: usize = 1024;

/// Expands `{a,b}` alternatives (nesting allowed): `*.{ts,tsx}` → `*.ts`, `*.tsx`. At most
/// `MAX_BRACE_ALTERNATIVES` results.
pub(crate) fn expand_braces(pattern: &str) -> Vec<String> {
    let mut out = Vec::new();
    expand_braces_into(pattern, &mut out);
    out
}

fn expand_braces_into(pattern: &str, out: &mut Vec<String>) {
    let chars: Vec<char> = pattern.chars().collect();
    let mut depth = 0;
    let mut open = None;
    let mut commas = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '{' => {
                if depth == 0 {
                    open = Some(i);
                    commas.clear();
                }
                depth += 1;
            }
            ',' if depth == 1 => commas.push(i),
            '}' if depth > 0 => {
                depth -= 1;
                if depth == 0
                    && let Some(o) = open
                {
                    if commas.is_empty() {
                        open = None;
                        i += 1;
                        continue;
                    }
                    let prefix: String = chars[..o].iter().collect();
                    let suffix: String = chars[i + 1..].iter().collect();
                    let mut bounds = vec![o];
                    bounds.extend(&commas);
                    bounds.push(i);
                    for w in bounds.windows(2) {
                        if out.len() >= MAX_BRACE_ALTERNATIVES {
                            return;
                        }
                        let alt: String = chars[w[0] + 1..w[1]].iter().collect();
                        expand_braces_into(&format!("{prefix}{alt}{suffix}"), out);
                    }
                    return;
                }
            }
            _ => {}
        }
        i += 1;
    }
    if out.len() < MAX_BRACE_ALTERNATIVES {
        out.push(pattern.to_string());
    }
}

/// A set of glob alternatives (after brace expansion). Patterns without `/` match the file name,
/// others the path relative to the search root.
pub(crate) struct GlobSet {
    patterns: Vec<Glob>,
    name_only: bool,
}

impl GlobSet {
    pub(crate) fn new(pattern: &str) -> GlobSet {
        let pattern = pattern.trim().trim_start_matches("./");
        GlobSet {
            name_only: !pattern.contains('/'),
            patterns: expand_braces(pattern)
                .iter()
                .map(|p| Glob::new(p))
                .collect(),
        }
    }

    pub(crate) fn matches(&self, rel: &str) -> bool {
        let target = if self.name_only {
            rel.rsplit('/').next().unwrap_or(rel)
        } else {
            rel
        };
        self.patterns.iter().any(|p| p.matches(target))
    }
}

#[derive(Clone, Debug)]
struct Rule {
    pattern: Glob,
    negated: bool,
    dir_only: bool,
}

/// The rules of one ignore file, relative to its directory.
#[derive(Clone, Debug)]
pub(crate) struct RuleSet {
    base: PathBuf,
    rules: Vec<Rule>,
}

impl RuleSet {
    pub(crate) fn parse(base: &Path, text: &str) -> RuleSet {
        let mut rules = Vec::new();
        for line in text.lines() {
            let mut line = line.trim_end_matches('\r');
            if !line.ends_with("\\ ") {
                line = line.trim_end();
            }
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut negated = false;
            if let Some(rest) = line.strip_prefix('!') {
                negated = true;
                line = rest;
            } else if line.starts_with("\\!") || line.starts_with("\\#") {
                line = &line[1..];
            }
            let dir_only = line.ends_with('/');
            let line = line.trim_end_matches('/');
            if line.is_empty() {
                continue;
            }
            let anchored = line.contains('/');
            let line = line.trim_start_matches('/');
            let pattern = Glob::new(&if anchored {
                line.to_string()
            } else {
                format!("**/{line}")
            });
            rules.push(Rule {
                pattern,
                negated,
                dir_only,
            });
        }
        RuleSet {
            base: base.to_path_buf(),
            rules,
        }
    }

    /// Loads the ignore files of `dir` (None when there are none or they hold no rules).
    pub(crate) fn load(dir: &Path) -> Option<RuleSet> {
        RuleSet::load_named(dir, IGNORE_FILES)
    }

    /// Loads the named ignore files of `dir`, concatenated in order.
    pub(crate) fn load_named(dir: &Path, names: &[&str]) -> Option<RuleSet> {
        let mut text = String::new();
        for name in names {
            if let Ok(Some(t)) = crate::fsutil::read_config(&dir.join(name)) {
                text.push_str(&String::from_utf8_lossy(&t));
                text.push('\n');
            }
        }
        let set = RuleSet::parse(dir, &text);
        (!set.rules.is_empty()).then_some(set)
    }

    /// Some(true) ignored, Some(false) re-included, None no rule matched.
    fn decide(&self, path: &Path, is_dir: bool) -> Option<bool> {
        let rel = path.strip_prefix(&self.base).ok()?;
        let rel = rel.to_string_lossy().replace('\\', "/");
        if rel.is_empty() {
            return None;
        }
        let mut result = None;
        for r in &self.rules {
            if r.dir_only && !is_dir {
                continue;
            }
            if r.pattern.matches(&rel) {
                result = Some(!r.negated);
            }
        }
        result
    }
}

/// Whether `path` is ignored by the stack of rule sets (outermost first).
pub(crate) fn is_ignored(stack: &[Rc<RuleSet>], path: &Path, is_dir: bool) -> bool {
    let mut ignored = false;
    for set in stack {
        if let Some(d) = set.decide(path, is_dir) {
            ignored = d;
        }
    }
    ignored
}

/// Applies `.crushignore` files (which ripgrep does not know) to paths ripgrep reported: a path
/// is ignored when it or one of its parent directories below `top` matches. Loads are cached.
pub(crate) struct CrushIgnoreFilter {
    top: PathBuf,
    cache: HashMap<PathBuf, Option<Rc<RuleSet>>>,
}

impl CrushIgnoreFilter {
    pub(crate) fn new(top: &Path) -> CrushIgnoreFilter {
        CrushIgnoreFilter {
            top: top.to_path_buf(),
            cache: HashMap::new(),
        }
    }

    fn rules(&mut self, dir: &Path) -> Option<Rc<RuleSet>> {
        if let Some(r) = self.cache.get(dir) {
            return r.clone();
        }
        let r = RuleSet::load_named(dir, &[".crushignore"]).map(Rc::new);
        self.cache.insert(dir.to_path_buf(), r.clone());
        r
    }

    pub(crate) fn ignored(&mut self, path: &Path, is_dir: bool) -> bool {
        let Ok(rel) = path.strip_prefix(&self.top) else {
            return false;
        };
        let comps: Vec<_> = rel.components().collect();
        let mut dir = self.top.clone();
        let mut stack: Vec<Rc<RuleSet>> = Vec::new();
        for (i, c) in comps.iter().enumerate() {
            if let Some(r) = self.rules(&dir) {
                stack.push(r);
            }
            dir.push(c);
            let last = i + 1 == comps.len();
            if !stack.is_empty() && is_ignored(&stack, &dir, if last { is_dir } else { true }) {
                return true;
            }
        }
        false
    }
}

/// The `rg` executable when it is on PATH (looked up once).
pub(crate) fn find_rg() -> Option<PathBuf> {
    static RG: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    RG.get_or_init(|| crate::proc::which("rg")).clone()
}

#[derive(Clone, Debug, Default)]
pub(crate) struct WalkOptions {
    /// Include names starting with `.` (`.git` is skipped regardless).
    pub hidden: bool,
    /// Entries deeper than this are not visited (1 = the root's children only).
    pub max_depth: Option<usize>,
    /// Names always skipped (e.g. `node_modules`).
    pub skip_names: Vec<String>,
    /// Directory from which ignore files above the walk root are read (the project root).
    pub top: Option<PathBuf>,
}

#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub path: PathBuf,
    /// Relative to the walk root, '/'-separated.
    pub rel: String,
    pub is_dir: bool,
}

pub(crate) enum Flow {
    Continue,
    /// Do not descend into this directory.
    Skip,
    Stop,
}

/// Breadth-first walk of `root` (sorted by name within each directory), honouring ignore files.
pub(crate) fn walk(root: &Path, opts: &WalkOptions, visit: &mut dyn FnMut(&Entry) -> Flow) {
    let mut stack: Vec<Rc<RuleSet>> = Vec::new();
    if let Some(top) = &opts.top
        && root.starts_with(top)
        && root != top
    {
        let mut dir = top.clone();
        if let Some(s) = RuleSet::load(&dir) {
            stack.push(Rc::new(s));
        }
        if let Ok(rel) = root.strip_prefix(top) {
            let comps: Vec<_> = rel.components().collect();
            for c in comps.iter().take(comps.len().saturating_sub(1)) {
                dir.push(c);
                if let Some(s) = RuleSet::load(&dir) {
                    stack.push(Rc::new(s));
                }
            }
        }
    }
    let mut queue: VecDeque<(PathBuf, String, usize, Vec<Rc<RuleSet>>)> = VecDeque::new();
    queue.push_back((root.to_path_buf(), String::new(), 0, stack));
    while let Some((dir, rel, depth, mut stack)) = queue.pop_front() {
        if let Some(s) = RuleSet::load(&dir) {
            stack.push(Rc::new(s));
        }
        let Ok(rd) = fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<(String, PathBuf, bool)> = rd
            .filter_map(|e| e.ok())
            .map(|e| {
                let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
                (
                    e.file_name().to_string_lossy().into_owned(),
                    e.path(),
                    is_dir,
                )
            })
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, path, is_dir) in entries {
            if name == ".git"
                || (!opts.hidden && name.starts_with('.'))
                || opts.skip_names.contains(&name)
                || is_ignored(&stack, &path, is_dir)
            {
                continue;
            }
            let entry = Entry {
                rel: if rel.is_empty() {
                    name.clone()
                } else {
                    format!("{rel}/{name}")
                },
                path,
                is_dir,
            };
            match visit(&entry) {
                Flow::Stop => return,
                Flow::Skip => continue,
                Flow::Continue => {}
            }
            if is_dir && opts.max_depth.is_none_or(|m| depth + 1 < m) {
                queue.push_back((entry.path, entry.rel, depth + 1, stack.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testutil::Fixture;

    #[test]
    fn globs() {
        assert!(glob_match("*.rs", "main.rs"));
        assert!(!glob_match("*.rs", "src/main.rs"));
        assert!(glob_match("**/*.rs", "main.rs"));
        assert!(glob_match("**/*.rs", "src/a/main.rs"));
        assert!(glob_match("src/**", "src/a/b"));
        assert!(!glob_match("src/**", "src"));
        assert!(glob_match("a/**/b", "a/b"));
        assert!(glob_match("a/**/b", "a/x/y/b"));
        assert!(glob_match("?.txt", "a.txt"));
        assert!(!glob_match("?.txt", "ab.txt"));
        assert!(glob_match("[a-c]x", "bx"));
        assert!(!glob_match("[!a-c]x", "bx"));
        assert!(glob_match("[!a-c]x", "dx"));
        assert!(glob_match("\\*", "*"));
        assert!(glob_match("[", "["));
        assert_eq!(expand_braces("*.{ts,tsx}"), vec!["*.ts", "*.tsx"]);
        assert_eq!(expand_braces("{a,b{c,d}}x"), vec!["ax", "bcx", "bdx"]);
        assert_eq!(expand_braces("{x}"), vec!["{x}"]);
        let g = GlobSet::new("*.{rs,md}");
        assert!(g.matches("deep/dir/readme.md"));
        let g = GlobSet::new("src/**/*.rs");
        assert!(g.matches("src/x/y.rs") && !g.matches("tests/y.rs"));
    }

    /// The previous backtracking matcher, kept as the reference for the semantics.
    fn match_chars(p: &[char], s: &[char]) -> bool {
        if p.is_empty() {
            return s.is_empty();
        }
        if p.len() >= 2 && p[0] == '*' && p[1] == '*' {
            let mut k = 0;
            while k < p.len() && p[k] == '*' {
                k += 1;
            }
            let rest = &p[k..];
            if rest.is_empty() {
                return true;
            }
            if rest[0] == '/' {
                let rest = &rest[1..];
                if match_chars(rest, s) {
                    return true;
                }
                return s
                    .iter()
                    .enumerate()
                    .any(|(i, c)| *c == '/' && match_chars(rest, &s[i + 1..]));
            }
            return match_chars(&p[k - 1..], s);
        }
        match p[0] {
            '*' => {
                for i in 0..=s.len() {
                    if match_chars(&p[1..], &s[i..]) {
                        return true;
                    }
                    if i < s.len() && s[i] == '/' {
                        break;
                    }
                }
                false
            }
            '?' => !s.is_empty() && s[0] != '/' && match_chars(&p[1..], &s[1..]),
            '[' => match s.first() {
                Some(&c) if c != '/' => match match_class(&p[1..], c) {
                    Some((true, used)) => match_chars(&p[1 + used..], &s[1..]),
                    Some((false, _)) => false,
                    None => c == '[' && match_chars(&p[1..], &s[1..]),
                },
                _ => false,
            },
            '\\' if p.len() > 1 => !s.is_empty() && s[0] == p[1] && match_chars(&p[2..], &s[1..]),
            c => !s.is_empty() && s[0] == c && match_chars(&p[1..], &s[1..]),
        }
    }

    #[test]
    fn glob_matches_like_the_backtracking_reference() {
        // A fixed xorshift sequence: many small patterns and paths over a tiny alphabet.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut rnd = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let pat_parts = [
            "*", "**", "**/", "/", "a", "b", "?", "[ab]", "[!a]", "\\*", "[", "/**",
        ];
        let path_parts = ["a", "b", "/", "*", "["];
        for _ in 0..20_000 {
            let pattern: String = (0..rnd(6))
                .map(|_| pat_parts[rnd(pat_parts.len())])
                .collect();
            let path: String = (0..rnd(8))
                .map(|_| path_parts[rnd(path_parts.len())])
                .collect();
            let p: Vec<char> = pattern.chars().collect();
            let s: Vec<char> = path.chars().collect();
            assert_eq!(
                glob_match(&pattern, &path),
                match_chars(&p, &s),
                "pattern {pattern:?} path {path:?}"
            );
        }
    }

    #[test]
    fn pathological_globs_finish() {
        // Exponential for a backtracking matcher (43 s before), immediate now.
        let pattern = "*a".repeat(10) + "b";
        assert!(!glob_match(&pattern, &"a".repeat(40)));
        assert!(glob_match(&pattern, &("a".repeat(40) + "b")));
        let pattern = "**/a".repeat(10) + "/b";
        assert!(!glob_match(&pattern, &"a/".repeat(40)));
        let set = Rc::new(RuleSet::parse(Path::new("/p"), &pattern));
        assert!(!is_ignored(
            &[set],
            &Path::new("/p").join("a/".repeat(40)),
            false
        ));
        // Brace groups multiply: the expansion is capped.
        assert_eq!(
            expand_braces(&"{a,b}".repeat(30)).len(),
            MAX_BRACE_ALTERNATIVES
        );
        assert!(GlobSet::new(&"{a,b}".repeat(30)).matches(&"a".repeat(30)));
    }

    #[test]
    fn gitignore_rules() {
        let base = Path::new("/p");
        let set = Rc::new(RuleSet::parse(
            base,
            "# comment\n*.log\n!keep.log\nbuild/\n/root_only\ndocs/*.tmp\n\\#hash\n",
        ));
        let st = [set];
        let ig = |p: &str, d: bool| is_ignored(&st, &base.join(p), d);
        assert!(ig("a.log", false));
        assert!(ig("x/y/a.log", false));
        assert!(!ig("keep.log", false));
        assert!(ig("build", true));
        assert!(!ig("build", false));
        assert!(ig("sub/build", true));
        assert!(ig("root_only", false));
        assert!(!ig("sub/root_only", false));
        assert!(ig("docs/a.tmp", false));
        assert!(!ig("docs/x/a.tmp", false));
        assert!(ig("#hash", false));
        assert!(!ig("main.rs", false));
    }

    #[test]
    fn crushignore_filter() {
        let fx = Fixture::new();
        fx.write(".crushignore", "secret/\n*.key\n");
        fx.write("sub/.crushignore", "local.txt\n");
        let mut f = CrushIgnoreFilter::new(fx.root());
        assert!(f.ignored(&fx.path("secret/a.txt"), false));
        assert!(f.ignored(&fx.path("x/y.key"), false));
        assert!(f.ignored(&fx.path("sub/local.txt"), false));
        assert!(!f.ignored(&fx.path("local.txt"), false));
        assert!(!f.ignored(&fx.path("sub/ok.txt"), false));
        assert!(!f.ignored(Path::new("/elsewhere/secret/a"), false));
    }

    #[test]
    fn walk_honours_hierarchical_ignores() {
        let fx = Fixture::new();
        fx.write(".gitignore", "target/\n*.log\n");
        fx.write("a.rs", "");
        fx.write("a.log", "");
        fx.write("target/x.rs", "");
        fx.write("sub/.gitignore", "!keep.log\nlocal.rs\n");
        fx.write("sub/keep.log", "");
        fx.write("sub/local.rs", "");
        fx.write("sub/b.rs", "");
        fx.write("sub/deeper/c.rs", "");
        fx.write(".crushignore", "secret/\n");
        fx.write("secret/s.rs", "");
        fx.write(".hidden/h.rs", "");
        fx.write("node_modules/m.js", "");
        let mut seen = Vec::new();
        let opts = WalkOptions {
            skip_names: vec!["node_modules".into()],
            ..Default::default()
        };
        walk(fx.root(), &opts, &mut |e| {
            seen.push(e.rel.clone());
            Flow::Continue
        });
        assert_eq!(
            seen,
            [
                "a.rs",
                "sub",
                "sub/b.rs",
                "sub/deeper",
                "sub/keep.log",
                "sub/deeper/c.rs"
            ]
        );
        // Walking a subdirectory still applies the project's ignore files.
        let mut seen = Vec::new();
        let opts = WalkOptions {
            top: Some(fx.root().to_path_buf()),
            max_depth: Some(1),
            ..Default::default()
        };
        fx.write("sub/z.log", "");
        walk(&fx.path("sub"), &opts, &mut |e| {
            seen.push(e.rel.clone());
            Flow::Continue
        });
        assert_eq!(seen, ["b.rs", "deeper", "keep.log"]);
    }
}
