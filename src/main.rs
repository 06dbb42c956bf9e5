fn main() {
    // Usage errors exit 1 (bad input), not clap's 2 (a missed --fail-under threshold).
    let cli = harness::cli::parse_args();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(harness::cli::main_with(cli));
    // Background removals spawned by dropped containers get a moment to finish.
    runtime.shutdown_timeout(std::time::Duration::from_secs(10));
    std::process::exit(code);
}
