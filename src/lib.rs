//! crush: a terminal AI coding assistant. The binary (`main.rs`) only parses flags and
//! dispatches; everything else lives in these modules, one per concept, in layers: a module
//! uses only modules of lower layers (`LAYERS`, checked by a test). README.md ("How it is
//! built") describes each layer.

pub mod agent;
pub mod app;
pub mod catalog;
pub mod cli;
pub mod commands;
pub mod config;
pub mod docs;
pub mod env;
pub mod fsutil;
pub mod hooks;
pub mod llm;
pub mod log;
pub mod net;
pub mod paths;
pub mod proc;
pub mod rcshell;
pub mod repl;
pub mod run;
pub mod signal;
pub mod store;
pub mod time;
pub mod tools;

/// The layers, lowest first. A module may use the modules of the layers before its own, never
/// one of its own layer or above (tests excepted).
#[cfg(test)]
const LAYERS: &[&[&str]] = &[
    &["time", "env", "paths"],
    &["log", "fsutil", "net", "proc"],
    &["signal", "rcshell"],
    &["llm"],
    &["store"],
    &["tools"],
    &["catalog"],
    &["config"],
    &["hooks"],
    &["agent"],
    &["app"],
    &["commands"],
    &["run", "repl"],
    &["cli"],
    &["docs"],
];

#[cfg(test)]
mod tests {
    use super::LAYERS;
    use std::path::Path;

    fn layer(module: &str) -> Option<usize> {
        LAYERS.iter().position(|l| l.contains(&module))
    }

    /// The modules `crate::` paths in `src` name (code before the first `#[cfg(test)]`).
    fn uses(src: &str) -> Vec<String> {
        let code = src.split("#[cfg(test)]").next().unwrap_or("");
        let path = regex_lite::Regex::new(r"crate::([a-z_]+)").unwrap();
        let group = regex_lite::Regex::new(r"use crate::\{([^}]*)\}").unwrap();
        let mut out: Vec<String> = path.captures_iter(code).map(|c| c[1].to_string()).collect();
        for g in group.captures_iter(code) {
            for item in g[1].split(',') {
                let name = item.trim().split("::").next().unwrap_or("").trim();
                if !name.is_empty() {
                    out.push(name.to_string());
                }
            }
        }
        out
    }

    fn walk(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, files);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }

    #[test]
    fn no_module_uses_its_own_layer_or_a_higher_one() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        walk(&src, &mut files);
        let mut wrong = Vec::new();
        let mut unplaced = Vec::new();
        for f in &files {
            let rel = f.strip_prefix(&src).unwrap();
            let module = rel
                .iter()
                .next()
                .unwrap()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string();
            let name = rel.file_name().unwrap().to_string_lossy();
            if ["lib", "main"].contains(&module.as_str()) || name == "tests.rs" {
                continue;
            }
            let Some(own) = layer(&module) else {
                unplaced.push(module);
                continue;
            };
            for used in uses(&std::fs::read_to_string(f).unwrap()) {
                if let Some(l) = layer(&used)
                    && used != module
                    && l >= own
                {
                    wrong.push(format!("{}: {module} uses {used}", rel.display()));
                }
            }
        }
        assert!(unplaced.is_empty(), "modules in no layer: {unplaced:?}");
        wrong.sort();
        wrong.dedup();
        assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
    }

    #[test]
    fn the_check_sees_both_forms_of_use() {
        let u = uses("use crate::{agent::Agent, store};\nfn f() { crate::llm::x(); }");
        assert_eq!(u, ["llm", "agent", "store"]);
    }
}
