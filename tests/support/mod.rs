//! Test support: a scripted fake LLM server speaking Anthropic and OpenAI streaming, and a
//! temporary environment to run the real `crush` binary in.
//!
//! ```ignore
//! let server = FakeServer::with_script(vec![
//!     Reply::tool_call("bash", json!({"command": "echo hi > f.txt"})),
//!     Reply::text("done"),
//! ]);
//! let env = TestEnv::new();
//! env.use_server(&server, Dialect::OpenAi);
//! let out = env.run(&["run", "-q", "-y", "make f.txt"], None);
//! out.assert_success();
//! assert_eq!(server.request_count(), 2);
//! // Dropping `server` fails the test on protocol violations or unused script replies.
//! ```

#![allow(dead_code)]

pub(crate) mod bedrock;
pub(crate) mod checks;
pub(crate) mod echo;
pub(crate) mod env;
pub(crate) mod http;
pub(crate) mod lsp;
pub(crate) mod mcp;
pub(crate) mod reply;
pub(crate) mod server;
// The crate's own SHA-256, SigV4 and event-stream code (each checked against published vectors
// by its unit tests): the fake server signs-checks and frames with them.
#[allow(unused_imports)]
pub(crate) use crush::wire::{eventstream, sha256, sigv4};

#[allow(unused_imports)]
pub(crate) use env::{Output, RUN_TIMEOUT, TestEnv};
#[allow(unused_imports)]
pub(crate) use reply::{Dialect, Fault, Reply, Stream, ToolCall, Usage};
#[allow(unused_imports)]
pub(crate) use server::{FakeServer, Recorded, Source};
