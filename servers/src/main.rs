fn main() -> std::process::ExitCode {
    atlas_servers::cli::main()
}
