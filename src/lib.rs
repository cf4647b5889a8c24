//! crush: a terminal AI coding assistant. The binary (`main.rs`) only parses flags and
//! dispatches; everything else lives in these modules, one per concept.

pub mod agent;
pub mod app;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod docs;
pub mod env;
pub mod fsutil;
pub mod hooks;
pub mod hooks_cmd;
pub mod llm;
pub mod log;
pub mod net;
pub mod paths;
pub mod proc;
pub mod rcshell;
pub mod repl;
pub mod run;
pub mod sessions;
pub mod signal;
pub mod stats;
pub mod store;
pub mod time;
pub mod tools;
