//! The `jq` crush gives hooks when none is installed (crush(1) HOOKS, jq): the jq language of
//! the jaq crates, behind jq's own command line for what hooks use — a filter, JSON values from
//! stdin or files, `-r`, `-j`, `-c`, `-n`, `-s`, `-e`, `--arg`, `--argjson`. crush runs as it when
//! started as `crush __jq ARGS` or through a link named `jq`.

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Vars, data, unwrap_valr};
use jaq_json::Val;
use std::ffi::OsString;
use std::io::{Read, Write};

/// The first argument that makes crush act as jq.
pub(crate) const ARG: &str = "__jq";

/// What the command line asked for.
#[derive(Debug, Default, PartialEq)]
struct Opts {
    filter: Option<String>,
    files: Vec<String>,
    raw: bool,
    join: bool,
    compact: bool,
    null_input: bool,
    slurp: bool,
    exit_status: bool,
    sort_keys: bool,
    tab: bool,
    /// `--arg` and `--argjson`: names (without `$`) and values.
    vars: Vec<(String, VarValue)>,
}

#[derive(Debug, PartialEq)]
enum VarValue {
    Text(String),
    Json(String),
}

/// Why jq stopped before running the filter, with jq's exit status.
#[derive(Debug, PartialEq)]
pub(crate) enum JqError {
    /// A bad command line: exit 2.
    Usage(String),
    /// The filter does not parse or compile: exit 3.
    Compile(String),
    /// An input is not JSON, or a file cannot be read: exit 2.
    Input(String),
}

impl JqError {
    fn code(&self) -> i32 {
        match self {
            JqError::Usage(_) | JqError::Input(_) => 2,
            JqError::Compile(_) => 3,
        }
    }
}

impl std::fmt::Display for JqError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JqError::Usage(m) => write!(f, "jq: usage: {m}"),
            JqError::Compile(m) => write!(f, "jq: error: {m}"),
            JqError::Input(m) => write!(f, "jq: error: {m}"),
        }
    }
}

impl std::error::Error for JqError {}

fn parse_args(args: &[String]) -> Result<Opts, JqError> {
    let mut o = Opts::default();
    let mut i = 0;
    let mut only_operands = false;
    let value = |i: usize, n: usize, flag: &str| -> Result<Vec<String>, JqError> {
        args.get(i + 1..i + 1 + n)
            .map(<[String]>::to_vec)
            .ok_or_else(|| JqError::Usage(format!("{flag} takes {n} argument(s)")))
    };
    while i < args.len() {
        let a = &args[i];
        if only_operands || !a.starts_with('-') || a == "-" {
            if o.filter.is_none() {
                o.filter = Some(a.clone());
            } else {
                o.files.push(a.clone());
            }
            i += 1;
            continue;
        }
        match a.as_str() {
            "--" => only_operands = true,
            "--raw-output" => o.raw = true,
            "--join-output" => (o.raw, o.join) = (true, true),
            "--compact-output" => o.compact = true,
            "--null-input" => o.null_input = true,
            "--slurp" => o.slurp = true,
            "--exit-status" => o.exit_status = true,
            "--sort-keys" => o.sort_keys = true,
            "--tab" => o.tab = true,
            "--monochrome-output" | "--ascii-output" | "--unbuffered" | "--color-output" => {}
            "--arg" | "--argjson" => {
                let v = value(i, 2, a)?;
                let val = if a == "--arg" {
                    VarValue::Text(v[1].clone())
                } else {
                    VarValue::Json(v[1].clone())
                };
                o.vars.push((v[0].clone(), val));
                i += 2;
            }
            long if long.starts_with("--") => {
                return Err(JqError::Usage(format!("unknown option {long}")));
            }
            short => {
                for c in short.chars().skip(1) {
                    match c {
                        'r' => o.raw = true,
                        'j' => (o.raw, o.join) = (true, true),
                        'c' => o.compact = true,
                        'n' => o.null_input = true,
                        's' => o.slurp = true,
                        'e' => o.exit_status = true,
                        'S' => o.sort_keys = true,
                        'M' | 'a' | 'C' => {}
                        _ => return Err(JqError::Usage(format!("unknown option -{c}"))),
                    }
                }
            }
        }
        i += 1;
    }
    Ok(o)
}

/// The JSON values of `bytes` (`what` names them in an error).
fn values(bytes: &[u8], what: &str) -> Result<Vec<Val>, JqError> {
    jaq_json::read::parse_many(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| JqError::Input(format!("{what} is not valid JSON: {e}")))
}

/// Runs jq with `args` (the words after the program's name); its exit status.
pub(crate) fn run(
    args: &[String],
    stdin: &mut dyn Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    match run_inner(args, stdin, out, err) {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(err, "{e}");
            e.code()
        }
    }
}

fn run_inner(
    args: &[String],
    stdin: &mut dyn Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32, JqError> {
    let o = parse_args(args)?;
    let code = o.filter.clone().unwrap_or_else(|| ".".to_string());
    // Inputs first: a bad one stops jq before any output.
    let mut inputs: Vec<Val> = Vec::new();
    if !o.null_input || o.slurp {
        if o.files.is_empty() {
            let mut buf = Vec::new();
            stdin
                .read_to_end(&mut buf)
                .map_err(|e| JqError::Input(format!("cannot read stdin: {e}")))?;
            inputs = values(&buf, "stdin")?;
        } else {
            for f in &o.files {
                let buf = std::fs::read(f)
                    .map_err(|e| JqError::Input(format!("cannot read {f}: {e}")))?;
                inputs.extend(values(&buf, f)?);
            }
        }
    }
    if o.slurp {
        inputs = vec![inputs.into_iter().collect()];
    }
    if o.null_input {
        inputs = vec![Val::Null];
    }

    let mut var_values = Vec::new();
    for (_, v) in &o.vars {
        var_values.push(match v {
            VarValue::Text(t) => Val::from(t.clone()),
            VarValue::Json(j) => jaq_json::read::parse_single(j.as_bytes())
                .map_err(|e| JqError::Usage(format!("--argjson value is not JSON: {e}")))?,
        });
    }
    let names: Vec<String> = o.vars.iter().map(|(n, _)| format!("${n}")).collect();
    let defs = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs());
    let funs = jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs());
    let loader = Loader::new(defs);
    let arena = Arena::default();
    let modules = loader
        .load(
            &arena,
            File {
                code: code.as_str(),
                path: (),
            },
        )
        .map_err(|e| JqError::Compile(format!("the filter does not parse: {:?}", e[0].1)))?;
    let filter = Compiler::default()
        .with_funs(funs)
        .with_global_vars(names.iter().map(String::as_str))
        .compile(modules)
        .map_err(|e| {
            let names: Vec<String> = e
                .iter()
                .flat_map(|(_, errs)| {
                    errs.iter()
                        .map(|(name, undef)| format!("{name} ({undef:?})"))
                })
                .collect();
            JqError::Compile(format!("the filter does not compile: {}", names.join(", ")))
        })?;

    let pp = jaq_json::write::Pp {
        indent: (!o.compact).then(|| if o.tab { "\t" } else { "  " }.to_string()),
        sort_keys: o.sort_keys,
        styles: Default::default(),
        sep_space: !o.compact,
    };
    let mut last: Option<bool> = None;
    let mut failed = false;
    for input in inputs {
        let ctx = Ctx::<data::JustLut<Val>>::new(&filter.lut, Vars::new(var_values.clone()));
        for v in filter.id.run((ctx, input)).map(unwrap_valr) {
            match v {
                Ok(v) => {
                    last = Some(!matches!(v, Val::Null | Val::Bool(false)));
                    let written = match (&v, o.raw) {
                        (Val::TStr(s), true) => out.write_all(s),
                        _ => jaq_json::write::write(out, &pp, 0, &v),
                    };
                    let end = if o.join { Ok(()) } else { out.write_all(b"\n") };
                    if written.and(end).is_err() {
                        // The reader went away (a closed pipe): as jq, stop quietly.
                        return Ok(if failed { 5 } else { 0 });
                    }
                }
                Err(e) => {
                    let _ = writeln!(err, "jq: error (at <stdin>): {e}");
                    failed = true;
                }
            }
        }
    }
    let _ = out.flush();
    Ok(match (failed, o.exit_status, last) {
        (true, _, _) => 5,
        (false, true, None) => 4,
        (false, true, Some(false)) => 1,
        _ => 0,
    })
}

/// `crush __jq ARGS` or a link named `jq`: Some(jq's exit status) when crush was started so.
pub(crate) fn as_jq(argv: &[OsString]) -> Option<i32> {
    let name = argv
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .is_some_and(|n| n == "jq");
    let rest = if name {
        &argv[1..]
    } else if argv.get(1).is_some_and(|a| a == ARG) {
        &argv[2..]
    } else {
        return None;
    };
    let args: Vec<String> = rest
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let (stdin, stdout, stderr) = (std::io::stdin(), std::io::stdout(), std::io::stderr());
    let mut out = std::io::BufWriter::new(stdout.lock());
    let code = run(&args, &mut stdin.lock(), &mut out, &mut stderr.lock());
    let _ = out.flush();
    Some(code)
}

/// Whether a program `name` is on `path` (a PATH value).
pub(crate) fn on_path(name: &str, path: &std::ffi::OsStr) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path).any(|d| {
        std::fs::metadata(d.join(name))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// The folder `dir/bin` holding a link `jq` to this executable (made or re-pointed as needed);
/// None when it cannot be made (hooks then go without).
pub(crate) fn shim_dir(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let shim = dir.join("bin");
    let link = shim.join("jq");
    if std::fs::read_link(&link).is_ok_and(|l| l == exe) {
        return Some(shim);
    }
    std::fs::create_dir_all(&shim).ok()?;
    // Made beside it and renamed over it: another crush never sees a missing jq.
    let tmp = shim.join(format!(".jq-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&exe, &tmp).ok()?;
    std::fs::rename(&tmp, &link).ok()?;
    Some(shim)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jq(args: &[&str], input: &str) -> (i32, String, String) {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run(&args, &mut input.as_bytes(), &mut out, &mut err);
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    const PAYLOAD: &str = r#"{"tool_name":"Bash","tool_input":{"command":"rm -rf /","n":[1,2]}}"#;

    #[test]
    fn what_guard_hooks_use() {
        assert_eq!(
            jq(&["-r", ".tool_input.command"], PAYLOAD),
            (0, "rm -rf /\n".into(), String::new())
        );
        assert_eq!(jq(&[".tool_input.n"], PAYLOAD).1, "[\n  1,\n  2\n]\n");
        assert_eq!(
            jq(&["-c", ".tool_input"], PAYLOAD).1,
            "{\"command\":\"rm -rf /\",\"n\":[1,2]}\n"
        );
        assert_eq!(
            jq(&[".tool_input | {command}"], PAYLOAD).1,
            "{\n  \"command\": \"rm -rf /\"\n}\n"
        );
        assert_eq!(jq(&["-rc", ".tool_name // empty"], PAYLOAD).1, "Bash\n");
        assert_eq!(jq(&["-r", ".missing // empty"], PAYLOAD).1, "");
        // -e: the last value decides.
        assert_eq!(
            jq(&["-e", ".tool_input.command | test(\"rm -rf\")"], PAYLOAD).0,
            0
        );
        assert_eq!(jq(&["-e", ".missing"], PAYLOAD).0, 1);
        assert_eq!(jq(&["-e", "empty"], PAYLOAD).0, 4);
        // -n and --arg, --argjson: a hook's answer built from values.
        let (code, out, _) = jq(
            &[
                "-nc",
                "--arg",
                "r",
                "no rm",
                "--argjson",
                "x",
                "[1]",
                "{decision: \"block\", reason: $r, x: $x}",
            ],
            "",
        );
        assert_eq!(
            (code, out.as_str()),
            (
                0,
                "{\"decision\":\"block\",\"reason\":\"no rm\",\"x\":[1]}\n"
            )
        );
        assert_eq!(jq(&["-s", "length"], "1 2 3").1, "3\n");
        assert_eq!(jq(&["-j", ".[]"], "[\"a\",\"b\"]").1, "ab");
    }

    #[test]
    fn bad_filters_inputs_and_flags_are_jqs_errors() {
        let (code, _, err) = jq(&[".a |"], "{}");
        assert_eq!(code, 3, "{err}");
        let (code, _, err) = jq(&["."], "{not json");
        assert_eq!(code, 2);
        assert!(err.contains("stdin is not valid JSON"), "{err}");
        let (code, _, err) = jq(&["--frobnicate", "."], "{}");
        assert_eq!(code, 2);
        assert!(err.contains("unknown option --frobnicate"), "{err}");
        let (code, _, err) = jq(&[".a + 1"], "{\"a\":\"x\"}");
        assert_eq!(code, 5);
        assert!(err.contains("jq: error"), "{err}");
        assert_eq!(jq(&["$undefined"], "{}").0, 3);
    }

    #[test]
    fn on_path_finds_executables_only() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("jq");
        std::fs::write(&f, "").unwrap();
        assert!(!on_path("jq", t.path().as_os_str()));
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(on_path("jq", t.path().as_os_str()));
    }
}
