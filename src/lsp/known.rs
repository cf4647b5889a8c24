//! Well-known language servers: the defaults of a configured entry named after one of them (or
//! running its command), and the servers `options.auto_lsp` looks for on PATH. For one language
//! only the first server found is started (basedpyright, else pyright, else pylsp).

/// A well-known server.
pub(crate) struct Known {
    pub name: &'static str,
    pub command: &'static str,
    pub args: &'static [&'static str],
    pub filetypes: &'static [&'static str],
    pub root_markers: &'static [&'static str],
    /// Servers of one language share a group; the first found on PATH wins.
    pub group: &'static str,
    /// `workspace/configuration` settings (JSON).
    pub settings: &'static str,
}

const PYTHON_MARKERS: &[&str] = &[
    "pyrightconfig.json",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "requirements.txt",
    "Pipfile",
    ".git",
];

const PYRIGHT_SETTINGS: &str = r#"{"python": {"analysis": {"autoSearchPaths": true, "diagnosticMode": "openFilesOnly", "useLibraryCodeForTypes": true}}}"#;

pub(crate) const KNOWN: &[Known] = &[
    Known {
        name: "gopls",
        command: "gopls",
        args: &[],
        filetypes: &["go", "gomod", "gowork", "gotmpl"],
        root_markers: &["go.work", "go.mod", ".git"],
        group: "go",
        settings: "",
    },
    Known {
        name: "rust-analyzer",
        command: "rust-analyzer",
        args: &[],
        filetypes: &["rust"],
        root_markers: &["Cargo.toml", "rust-project.json"],
        group: "rust",
        settings: "",
    },
    Known {
        name: "typescript-language-server",
        command: "typescript-language-server",
        args: &["--stdio"],
        filetypes: &[
            "javascript",
            "javascriptreact",
            "typescript",
            "typescriptreact",
        ],
        root_markers: &["tsconfig.json", "jsconfig.json", "package.json", ".git"],
        group: "typescript",
        settings: "",
    },
    Known {
        name: "basedpyright",
        command: "basedpyright-langserver",
        args: &["--stdio"],
        filetypes: &["python"],
        root_markers: PYTHON_MARKERS,
        group: "python",
        settings: r#"{"basedpyright": {"analysis": {"autoSearchPaths": true, "diagnosticMode": "openFilesOnly"}}}"#,
    },
    Known {
        name: "pyright",
        command: "pyright-langserver",
        args: &["--stdio"],
        filetypes: &["python"],
        root_markers: PYTHON_MARKERS,
        group: "python",
        settings: PYRIGHT_SETTINGS,
    },
    Known {
        name: "pylsp",
        command: "pylsp",
        args: &[],
        filetypes: &["python"],
        root_markers: PYTHON_MARKERS,
        group: "python",
        settings: "",
    },
    Known {
        name: "clangd",
        command: "clangd",
        args: &[],
        filetypes: &["c", "cpp", "objc", "objcpp", "cuda"],
        root_markers: &[
            ".clangd",
            ".clang-tidy",
            ".clang-format",
            "compile_commands.json",
            "compile_flags.txt",
            "configure.ac",
            ".git",
        ],
        group: "c",
        settings: "",
    },
    Known {
        name: "zls",
        command: "zls",
        args: &[],
        filetypes: &["zig", "zir"],
        root_markers: &["zls.json", "build.zig", ".git"],
        group: "zig",
        settings: "",
    },
    Known {
        name: "lua-language-server",
        command: "lua-language-server",
        args: &[],
        filetypes: &["lua"],
        root_markers: &[
            ".luarc.json",
            ".luarc.jsonc",
            ".stylua.toml",
            "stylua.toml",
            ".git",
        ],
        group: "lua",
        settings: "",
    },
    Known {
        name: "bash-language-server",
        command: "bash-language-server",
        args: &["start"],
        filetypes: &["sh", "bash"],
        root_markers: &[".git"],
        group: "sh",
        settings: "",
    },
    Known {
        name: "metals",
        command: "metals",
        args: &[],
        filetypes: &["scala"],
        root_markers: &["build.sbt", "build.sc", "build.gradle", "pom.xml"],
        group: "scala",
        settings: "",
    },
    Known {
        name: "buf",
        command: "buf",
        args: &["lsp", "serve", "--log-format=text"],
        filetypes: &["proto"],
        root_markers: &["buf.yaml", ".git"],
        group: "proto",
        settings: "",
    },
    Known {
        name: "solargraph",
        command: "solargraph",
        args: &["stdio"],
        filetypes: &["ruby"],
        root_markers: &["Gemfile", ".git"],
        group: "ruby",
        settings: "",
    },
];

/// Other names configurations give a well-known server (Go Crush's and editors' names).
const ALIASES: &[(&str, &str)] = &[("buf-language-server", "buf"), ("buf_ls", "buf")];

/// The well-known server named `name`, or running the command `name`.
pub(crate) fn find(name: &str) -> Option<&'static Known> {
    let name = ALIASES
        .iter()
        .find(|(a, _)| *a == name)
        .map_or(name, |(_, n)| *n);
    KNOWN
        .iter()
        .find(|k| k.name == name)
        .or_else(|| KNOWN.iter().find(|k| k.command == name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_by_name_or_command_and_settings_are_json() {
        assert_eq!(find("pyright-langserver").map(|k| k.name), Some("pyright"));
        assert_eq!(find("gopls").map(|k| k.command), Some("gopls"));
        assert!(find("nope").is_none());
        // Go Crush's defaults for Scala and Protocol Buffers.
        let metals = find("metals").unwrap();
        assert_eq!((metals.command, metals.filetypes[0]), ("metals", "scala"));
        for name in ["buf", "buf-language-server", "buf_ls"] {
            let buf = find(name).unwrap();
            assert_eq!(buf.args, ["lsp", "serve", "--log-format=text"], "{name}");
            assert_eq!(buf.filetypes, ["proto"], "{name}");
        }
        for k in KNOWN {
            if !k.settings.is_empty() {
                assert!(
                    serde_json::from_str::<serde_json::Value>(k.settings).is_ok(),
                    "{}",
                    k.name
                );
            }
        }
    }
}
