fn main() -> std::process::ExitCode {
    atlas_cli::cli::main()
}
