//! crush: everything is in the library; see `crush::main`.

fn main() -> std::process::ExitCode {
    crush::main()
}
