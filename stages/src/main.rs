fn main() -> std::process::ExitCode {
    atlas_stages::cli::main()
}
