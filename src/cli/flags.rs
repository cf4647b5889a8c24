//! The flag table: each row is a flag's spelling, its text for `--help`, the man page and the
//! completions, the commands it applies to, and its setter — what parsing it does. A flag
//! without a setter does not compile.

use super::{CliError, Cmd, Parsed};

/// Which commands a flag applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Every command.
    Global,
    /// Only the listed commands (`Cmd::Repl`: no command, the interactive session).
    Only(&'static [Cmd]),
}

/// What a flag takes, and what it does with it.
#[derive(Clone, Copy)]
pub(crate) enum Takes {
    /// A switch: no value.
    Switch(fn(&mut Parsed)),
    /// A value named NAME (`DIR`, `FILE`...), taken as given.
    Value(&'static str, fn(&mut Parsed, String)),
    /// A value named NAME that must make sense (a number, one of some words).
    Checked(
        &'static str,
        fn(&mut Parsed, String) -> Result<(), CliError>,
    ),
}

pub(crate) struct Flag {
    pub short: Option<char>,
    pub long: &'static str,
    /// Whether it takes a value, and its setter.
    pub takes: Takes,
    /// One short line for `--help` (it must fit 80 columns beside the flag).
    pub help: &'static str,
    /// The man page's longer text; empty: `help` says it all.
    pub detail: &'static str,
    pub scope: Scope,
}

impl Flag {
    /// Name of the value (`DIR`, `FILE`...) or None for a switch.
    pub(crate) fn value(&self) -> Option<&'static str> {
        match self.takes {
            Takes::Switch(_) => None,
            Takes::Value(name, _) | Takes::Checked(name, _) => Some(name),
        }
    }

    /// Whether the flag is valid for `command`.
    pub(crate) fn applies(&self, command: Cmd) -> bool {
        match self.scope {
            Scope::Global => true,
            Scope::Only(cmds) => cmds.contains(&command),
        }
    }
}

/// Hidden (in no help, man page or completion): `--generate man|bash|zsh|fish`.
pub(super) static GENERATE: Flag = Flag {
    short: None,
    long: "generate",
    takes: Takes::Value("KIND", |p, v| p.generate = Some(v)),
    help: "",
    detail: "",
    scope: Scope::Global,
};

fn tail(p: &mut Parsed, v: String) -> Result<(), CliError> {
    let n = v.parse().map_err(|_| CliError::BadValue {
        flag: "tail",
        takes: "a number of lines",
        value: v,
    })?;
    p.tail = Some(n);
    Ok(())
}

/// A `--since`/`--until` value: Unix seconds.
fn when(flag: &'static str, v: String) -> Result<i64, CliError> {
    crate::commands::stats::parse_when(&v, crate::time::unix_now()).ok_or(CliError::BadValue {
        flag,
        takes: "a number of days (7d) or a UTC date (2026-11-01)",
        value: v,
    })
}

fn since(p: &mut Parsed, v: String) -> Result<(), CliError> {
    p.stats.filter.since = Some(when("since", v)?);
    Ok(())
}

fn until(p: &mut Parsed, v: String) -> Result<(), CliError> {
    p.stats.filter.until = Some(when("until", v)?);
    Ok(())
}

fn max_cost(p: &mut Parsed, v: String) -> Result<(), CliError> {
    let usd = v
        .parse::<f64>()
        .ok()
        .filter(|&c| crate::agent::budget::valid_limit(c));
    p.run.max_cost = Some(usd.ok_or(CliError::BadValue {
        flag: "max-cost",
        takes: "a number of US dollars, 0 or more (e.g. 0.50)",
        value: v,
    })?);
    Ok(())
}

fn max_cost_unpriced(p: &mut Parsed, v: String) -> Result<(), CliError> {
    p.run.allow_unpriced = match v.as_str() {
        "allow" => true,
        "refuse" => false,
        _ => {
            return Err(CliError::BadValue {
                flag: "max-cost-unpriced",
                takes: "allow or refuse",
                value: v,
            });
        }
    };
    Ok(())
}

pub(crate) static FLAGS: &[Flag] = &[
    Flag {
        short: Some('c'),
        long: "cwd",
        takes: Takes::Value("DIR", |p, v| p.global.cwd = Some(v.into())),
        help: "Run as if started in DIR",
        detail: "",
        scope: Scope::Global,
    },
    Flag {
        short: Some('D'),
        long: "data-dir",
        takes: Takes::Value("DIR", |p, v| p.global.data_dir = Some(v.into())),
        help: "Project data directory (default .crush)",
        detail: "Use DIR as the project data directory (default <project>/.crush)",
        scope: Scope::Global,
    },
    Flag {
        short: Some('d'),
        long: "debug",
        takes: Takes::Switch(|p| p.global.debug = true),
        help: "Write debug logs to stderr and the log file",
        detail: "",
        scope: Scope::Global,
    },
    Flag {
        short: Some('y'),
        long: "yolo",
        takes: Takes::Switch(|p| p.global.yolo = true),
        help: "Allow every tool call without asking",
        detail: "Allow every tool call without asking (banned commands stay banned); in acp, sessions start in the yolo mode.",
        scope: Scope::Only(&[Cmd::Repl, Cmd::Run, Cmd::Init, Cmd::Acp]),
    },
    Flag {
        short: Some('m'),
        long: "model",
        takes: Takes::Value("[PROVIDER/]MODEL", |p, v| p.global.model = Some(v)),
        help: "The large model (stats: count only its calls)",
        detail: "Use this model as the large model; stats: count only this model's calls",
        scope: Scope::Only(&[
            Cmd::Repl,
            Cmd::Run,
            Cmd::Init,
            Cmd::Config,
            Cmd::Acp,
            Cmd::Stats,
            Cmd::Agents,
            Cmd::Debug,
        ]),
    },
    Flag {
        short: None,
        long: "small-model",
        takes: Takes::Value("[PROVIDER/]MODEL", |p, v| p.global.small_model = Some(v)),
        help: "The small model (titles, summaries)",
        detail: "",
        scope: Scope::Only(&[Cmd::Repl, Cmd::Run, Cmd::Init, Cmd::Config, Cmd::Acp]),
    },
    Flag {
        short: Some('s'),
        long: "session",
        takes: Takes::Value("ID", |p, v| p.global.session = Some(v)),
        help: "Continue session ID (or a unique prefix)",
        detail: "Continue the session with this id (or unique prefix)",
        scope: Scope::Only(&[Cmd::Repl, Cmd::Run]),
    },
    Flag {
        short: Some('C'),
        long: "continue",
        takes: Takes::Switch(|p| p.global.continue_last = true),
        help: "Continue the most recent session",
        detail: "",
        scope: Scope::Only(&[Cmd::Repl, Cmd::Run]),
    },
    Flag {
        short: Some('q'),
        long: "quiet",
        takes: Takes::Switch(|p| p.run.quiet = true),
        help: "Hide progress (and run's tool lines)",
        detail: "Hide the progress indicator (and, for run, the tool lines on stderr)",
        scope: Scope::Only(&[Cmd::Repl, Cmd::Run, Cmd::Init]),
    },
    Flag {
        short: None,
        long: "json",
        takes: Takes::Switch(|p| p.json = true),
        help: "Print JSON (run: one event per line)",
        detail: "Print JSON: one event per line for run, a document for listings",
        scope: Scope::Only(&[
            Cmd::Run,
            Cmd::Sessions,
            Cmd::Models,
            Cmd::Config,
            Cmd::Stats,
            Cmd::Projects,
            Cmd::Mcp,
            Cmd::Lsp,
            Cmd::Skills,
            Cmd::Agents,
        ]),
    },
    Flag {
        short: None,
        long: "system-prompt",
        takes: Takes::Value("TEXT", |p, v| p.global.system_prompt = Some(v)),
        help: "Use TEXT as the system prompt",
        detail: "Use TEXT as the system prompt instead of crush's default (options.system_prompt)",
        scope: Scope::Only(&[Cmd::Repl, Cmd::Run, Cmd::Debug]),
    },
    Flag {
        short: None,
        long: "system-prompt-file",
        takes: Takes::Value("FILE", |p, v| p.global.system_prompt_file = Some(v)),
        help: "Use the text of FILE as the system prompt",
        detail: "Use the text of FILE as the system prompt (options.system_prompt_file)",
        scope: Scope::Only(&[Cmd::Repl, Cmd::Run, Cmd::Debug]),
    },
    Flag {
        short: None,
        long: "token-stdin",
        takes: Takes::Switch(|p| p.token_stdin = true),
        help: "Read the token from stdin (no device flow)",
        detail: "Read the token from standard input instead of running the device flow",
        scope: Scope::Only(&[Cmd::Login]),
    },
    Flag {
        short: Some('f'),
        long: "follow",
        takes: Takes::Switch(|p| p.follow = true),
        help: "Keep printing lines as they are written",
        detail: "",
        scope: Scope::Only(&[Cmd::Logs]),
    },
    Flag {
        short: Some('t'),
        long: "tail",
        takes: Takes::Checked("N", tail),
        help: "Print the last N lines (default 1000; 0: all)",
        detail: "",
        scope: Scope::Only(&[Cmd::Logs]),
    },
    Flag {
        short: None,
        long: "sandbox",
        takes: Takes::Value("MODE", |p, v| p.global.sandbox = Some(v)),
        help: "off, read-only or workspace-write",
        detail: "Run the model's commands in the OS sandbox: off, read-only or workspace-write (see SECURITY).",
        scope: Scope::Only(&[Cmd::Repl, Cmd::Run, Cmd::Acp]),
    },
    Flag {
        short: None,
        long: "auto",
        takes: Takes::Switch(|p| p.global.auto = true),
        help: "Run bash and project writes unasked, sandboxed",
        detail: "Run bash and in-project writes without asking, in the workspace-write sandbox (see SECURITY)",
        scope: Scope::Only(&[Cmd::Repl, Cmd::Run, Cmd::Acp]),
    },
    Flag {
        short: None,
        long: "plan",
        takes: Takes::Switch(|p| p.global.plan = true),
        help: "Plan first: only the read-only tools",
        detail: "Plan first: only read-only tools, and the model ends with a plan (see PLAN MODE)",
        scope: Scope::Only(&[Cmd::Repl, Cmd::Run]),
    },
    Flag {
        short: None,
        long: "mode",
        takes: Takes::Value("MODE", |p, v| p.sandbox_mode = Some(v)),
        help: "read-only or workspace-write (default)",
        detail: "sandbox: the mode to run in (read-only or workspace-write; default workspace-write)",
        scope: Scope::Only(&[Cmd::Sandbox]),
    },
    Flag {
        short: None,
        long: "network",
        takes: Takes::Switch(|p| p.network = true),
        help: "Let the command reach the network",
        detail: "",
        scope: Scope::Only(&[Cmd::Sandbox]),
    },
    Flag {
        short: None,
        long: "origin",
        takes: Takes::Switch(|p| p.origin = true),
        help: "Name the layer and file:line that set each value",
        detail: "",
        scope: Scope::Only(&[Cmd::Config]),
    },
    Flag {
        short: None,
        long: "revoke",
        takes: Takes::Switch(|p| p.revoke = true),
        help: "Withdraw the project's trust",
        detail: "",
        scope: Scope::Only(&[Cmd::Trust]),
    },
    Flag {
        short: None,
        long: "trust",
        takes: Takes::Switch(|p| p.global.trust = true),
        help: "Trust the project for this invocation only",
        detail: "Trust the project for this invocation: its crushrc, hooks, MCP servers, $(...) values, .env and settings outside the allow-list",
        scope: Scope::Global,
    },
    Flag {
        short: None,
        long: "no-project-hooks",
        takes: Takes::Switch(|p| p.global.no_project_hooks = true),
        help: "Run without the project's own hooks",
        detail: "Run without the project's own hooks; without it, a project whose hooks are not trusted stops the run (exit 2), or refuses the session in acp",
        scope: Scope::Only(&[Cmd::Run, Cmd::Acp]),
    },
    Flag {
        short: None,
        long: "format",
        takes: Takes::Value("FORMAT", |p, v| p.format = Some(v)),
        help: "export: md or json; stats: text, json or csv",
        detail: "Format of sessions export (md or json, default md) or of stats (text, json or csv, default text)",
        scope: Scope::Only(&[Cmd::Sessions, Cmd::Stats]),
    },
    Flag {
        short: None,
        long: "all",
        takes: Takes::Switch(|p| p.stats.all = true),
        help: "stats: every project in projects.json; models: the whole catalog",
        detail: "",
        scope: Scope::Only(&[Cmd::Stats, Cmd::Models]),
    },
    Flag {
        short: None,
        long: "since",
        takes: Takes::Checked("WHEN", since),
        help: "Calls from WHEN on: 7d or 2026-11-01",
        detail: "stats: calls from WHEN on: 7d (days ago) or a UTC date 2026-11-01",
        scope: Scope::Only(&[Cmd::Stats]),
    },
    Flag {
        short: None,
        long: "until",
        takes: Takes::Checked("WHEN", until),
        help: "Calls before WHEN: 7d or 2026-11-01",
        detail: "stats: calls before WHEN (7d or 2026-11-01)",
        scope: Scope::Only(&[Cmd::Stats]),
    },
    Flag {
        short: None,
        long: "provider",
        takes: Takes::Value("ID", |p, v| p.stats.filter.provider = Some(v)),
        help: "Count only this provider's calls",
        detail: "",
        scope: Scope::Only(&[Cmd::Stats]),
    },
    Flag {
        short: None,
        long: "crawl-dir",
        takes: Takes::Value("DIR", |p, v| p.stats.crawl_dir = Some(v.into())),
        help: "Every project with a .crush/crush.db below DIR",
        detail: "stats: every project with a .crush/crush.db below DIR (up to 8 levels deep, 1000 databases)",
        scope: Scope::Only(&[Cmd::Stats]),
    },
    Flag {
        short: None,
        long: "html",
        takes: Takes::Switch(|p| p.stats.html = Some(None)),
        help: "Write the report as one self-contained HTML page",
        detail: "stats: write the report as one self-contained HTML page, to the FILE that follows or <data>/stats/index.html",
        scope: Scope::Only(&[Cmd::Stats]),
    },
    Flag {
        short: None,
        long: "open",
        takes: Takes::Switch(|p| p.stats.open = true),
        help: "Open the --html page in the browser",
        detail: "",
        scope: Scope::Only(&[Cmd::Stats]),
    },
    Flag {
        short: None,
        long: "chart",
        takes: Takes::Switch(|p| p.stats.chart = true),
        help: "Draw the bar charts even when stdout is not a terminal",
        detail: "",
        scope: Scope::Only(&[Cmd::Stats]),
    },
    Flag {
        short: None,
        long: "attach",
        takes: Takes::Value("FILE", |p, v| p.run.attach.push(v.into())),
        help: "Attach FILE to the prompt (repeatable)",
        detail: "Attach FILE to the prompt (repeatable): text is sent inline with its name, a PNG, JPEG, GIF or WebP image as an image",
        scope: Scope::Only(&[Cmd::Run]),
    },
    Flag {
        short: None,
        long: "max-cost",
        takes: Takes::Checked("USD", max_cost),
        help: "Stop once this run has spent USD (exit 4)",
        detail: "Stop before a model call once this run has spent USD (exit 4; see USAGE AND COST, Budget)",
        scope: Scope::Only(&[Cmd::Run]),
    },
    Flag {
        short: None,
        long: "max-cost-unpriced",
        takes: Takes::Checked("allow|refuse", max_cost_unpriced),
        help: "Under a budget, may unpriced models run?",
        detail: "Under a budget, call a model that has no price (default refuse)",
        scope: Scope::Only(&[Cmd::Run]),
    },
    Flag {
        short: None,
        long: "compact",
        takes: Takes::Switch(|p| p.run.compact = true),
        help: "With -s ID or -C: summarize the session first, as /compact does",
        detail: "With -s ID or -C: summarize the session first (as /compact does), then run the prompt if one is given",
        scope: Scope::Only(&[Cmd::Run]),
    },
    Flag {
        short: Some('o'),
        long: "output",
        takes: Takes::Value("FILE", |p, v| p.run.output = Some(v.into())),
        help: "Also write the final message to FILE",
        detail: "",
        scope: Scope::Only(&[Cmd::Run]),
    },
    Flag {
        short: None,
        long: "tool",
        takes: Takes::Value("NAME", |p, v| p.hooks.tool = Some(v)),
        help: "The tool of the event (e.g. bash)",
        detail: "The tool a hook event is about (e.g. bash): which hooks match, or the test call's tool",
        scope: Scope::Only(&[Cmd::Hooks]),
    },
    Flag {
        short: None,
        long: "input",
        takes: Takes::Value("JSON", |p, v| p.hooks.input = Some(v)),
        help: "The test call's tool input (default {})",
        detail: "The tool input of a hooks test, a JSON object (default {})",
        scope: Scope::Only(&[Cmd::Hooks]),
    },
    Flag {
        short: None,
        long: "prompt",
        takes: Takes::Value("TEXT", |p, v| p.hooks.prompt = Some(v)),
        help: "The test's UserPromptSubmit prompt",
        detail: "The prompt of a hooks test for UserPromptSubmit",
        scope: Scope::Only(&[Cmd::Hooks]),
    },
    Flag {
        short: Some('h'),
        long: "help",
        takes: Takes::Switch(|p| p.help = true),
        help: "Show help",
        detail: "",
        scope: Scope::Global,
    },
    Flag {
        short: None,
        long: "verbose",
        takes: Takes::Switch(|p| p.global.debug = true),
        help: "Same as --debug (Go Crush's run -v)",
        detail: "Write debug logs to stderr, as --debug does. Go Crush spells it -v after run; here -v is --version everywhere",
        scope: Scope::Only(&[Cmd::Run]),
    },
    Flag {
        short: Some('v'),
        long: "version",
        takes: Takes::Switch(|p| p.version = true),
        help: "Show the version",
        detail: "",
        scope: Scope::Global,
    },
];

#[cfg(test)]
mod tests {
    use super::super::{COMMANDS, lex, parse_from};
    use super::*;

    /// A value each flag's setter accepts, by the value's name.
    fn sample(name: &str) -> &'static str {
        match name {
            "N" => "7",
            "WHEN" => "2026-11-01",
            "USD" => "0.5",
            "allow|refuse" => "allow",
            _ => "sample-value",
        }
    }

    /// Every way to write the flag with its sample value: `--long V`, `-s V`, `--long=V`.
    fn spellings(f: &Flag) -> Vec<Vec<String>> {
        let mut forms = vec![vec![format!("--{}", f.long)]];
        if let Some(c) = f.short {
            forms.push(vec![format!("-{c}")]);
        }
        if let Some(name) = f.value() {
            let v = sample(name);
            for form in &mut forms {
                form.push(v.to_string());
            }
            forms.push(vec![format!("--{}={v}", f.long)]);
        }
        forms
    }

    /// The fields (`name: value` lines of the pretty Debug) `args` sets.
    fn fields_set(args: &[String]) -> Vec<String> {
        let nothing = format!("{:#?}", Parsed::default());
        let (p, _) = lex(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        format!("{p:#?}")
            .lines()
            .filter(|l| !nothing.lines().any(|n| n == *l))
            .filter_map(|l| l.trim_start().split_once(": "))
            .map(|(name, _)| name.to_string())
            .collect()
    }

    /// A flag's words (`max-cost-unpriced`: max, cost, unpriced).
    fn words(name: &str) -> Vec<&str> {
        name.split(['-', '_']).collect()
    }

    #[test]
    fn every_flag_row_sets_its_field_the_same_way_however_spelled() {
        for f in FLAGS.iter().chain([&GENERATE]) {
            let mut results = Vec::new();
            for args in spellings(f) {
                let (p, seen) = lex(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
                assert!(
                    seen.len() == 1 && std::ptr::eq(seen[0], f),
                    "{args:?} found the wrong row"
                );
                let text = format!("{p:?}");
                if let Takes::Value(name, _) = f.takes {
                    assert!(text.contains(sample(name)), "{args:?}: {text}");
                }
                results.push(text);
            }
            results.dedup();
            assert_eq!(results.len(), 1, "--{}'s spellings differ", f.long);
            // It lands in its own field: one named with a word of the flag's name, or, for a
            // flag whose help says "Same as --OTHER", OTHER's.
            let args = spellings(f).swap_remove(0);
            let set = fields_set(&args);
            match f.help.strip_prefix("Same as --") {
                Some(rest) => {
                    let other = rest.split(' ').next().unwrap_or("");
                    let row = FLAGS.iter().find(|o| o.long == other);
                    let other_args = spellings(row.unwrap_or_else(|| panic!("--{other}")));
                    assert_eq!(set, fields_set(&other_args[0]), "--{}", f.long);
                }
                None => assert!(
                    set.iter()
                        .any(|field| words(field).iter().any(|w| words(f.long).contains(w))),
                    "--{} sets {set:?}",
                    f.long
                ),
            }
        }
    }

    #[test]
    fn every_checked_flag_refuses_a_bad_value_naming_itself() {
        let checked = FLAGS
            .iter()
            .filter(|f| matches!(f.takes, Takes::Checked(..)));
        for f in checked {
            let e = lex([format!("--{}", f.long), "bogus".into()])
                .map(|_| ())
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with(&format!("--{} takes ", f.long)) && e.ends_with(", not 'bogus'"),
                "{e}"
            );
        }
    }

    #[test]
    fn every_flag_is_valid_where_its_scope_says_and_refused_elsewhere() {
        let commands = std::iter::once((Cmd::Repl, None))
            .chain(COMMANDS.iter().map(|c| (c.cmd, Some(c.name))))
            .collect::<Vec<_>>();
        for f in FLAGS {
            for (cmd, word) in &commands {
                let mut args: Vec<String> = word.iter().map(|w| w.to_string()).collect();
                args.extend(spellings(f).swap_remove(0));
                let r = parse_from(&args);
                let refused = matches!(&r, Err(CliError::NotFor { flag, command })
                    if *flag == f.long && command == cmd);
                assert_eq!(refused, !f.applies(*cmd), "{args:?}: {r:?}");
            }
        }
    }
}
