//! The single integration-test binary: shared support plus every suite module.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    clippy::print_stdout
)]

mod suite;
mod support;
