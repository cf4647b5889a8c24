//! The single integration-test binary: shared support plus every suite module.

mod suite;
mod support;
