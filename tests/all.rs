//! The single integration-test binary: shared support plus every suite module.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
mod support;
