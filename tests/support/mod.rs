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

pub mod checks;
pub mod env;
pub mod http;
pub mod lsp;
pub mod mcp;
pub mod reply;
pub mod server;

#[allow(unused_imports)]
pub use env::{Output, RUN_TIMEOUT, TestEnv};
#[allow(unused_imports)]
pub use reply::{Dialect, Fault, Reply, Stream, ToolCall, Usage};
#[allow(unused_imports)]
pub use server::{FakeServer, Recorded, Source};
