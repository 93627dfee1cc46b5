//! `graph-ascend serve`: the sidecar's launch contract with the Python shim.
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use graph_ascend_service::server::{self, PrivateSocket, TokenCheck};
use graph_ascend_service::State;
use graph_ascend_visdb::files::write_atomically;

/// Launch contract (kept stable for `python_shim`): the sidecar binds a Unix socket in a fresh
/// private directory (0700, socket 0600), writes `<socket path>\n` to `--ready-file` once it
/// accepts connections, writes the reason to `--error-file` and exits non-zero if it cannot start,
/// and with `--die-after-stdin` exits when its standard input closes (TensorBoard died).
///
/// Over loopback TCP (`--tcp-port`, the fallback) any local user could connect, so the launcher
/// must pass a per-launch secret as the first line of standard input (never on the command line,
/// which `ps` shows to everyone, nor in the environment, which `/proc/<pid>/environ` keeps), and
/// every request must carry it in the `x-graph-ascend-token`
/// metadata; others are answered UNAUTHENTICATED.
///
/// Clients must send `localhost` as the HTTP/2 authority (grpcio: channel option
/// `grpc.default_authority`): the one grpcio derives from a socket path is not a valid authority
/// and the server's HTTP/2 stack resets such streams.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// Folder whose .vis.db files (and dump folders, for conversion) are served.
    #[arg(long)]
    pub logdir: PathBuf,
    /// Where to write the socket path followed by a newline once serving.
    #[arg(long)]
    pub ready_file: Option<PathBuf>,
    /// Where to write the reason when start-up fails.
    #[arg(long)]
    pub error_file: Option<PathBuf>,
    /// Exit when standard input reaches end of file.
    #[arg(long)]
    pub die_after_stdin: bool,
    /// Directory in which to create the private socket directory (default: the system temp dir).
    #[arg(long)]
    pub socket_parent: Option<PathBuf>,
    /// Serve on this loopback TCP port instead of a Unix socket (0: any free port); needs a token
    /// as the first line of standard input.
    #[arg(long)]
    pub tcp_port: Option<u16>,
    /// How many conversions may run at once.
    #[arg(long, default_value_t = 2)]
    pub max_conversions: usize,
    /// Memory all clients' views (expanded hierarchies) may hold together, in MB; the least
    /// recently used go first.
    #[arg(long, default_value_t = graph_ascend_service::DEFAULT_MAX_VIEW_BYTES >> 20)]
    pub max_view_memory_mb: usize,
    /// Memory the per-graph indexes (node lists, filters, search) of all files may hold
    /// together, in MB; the least recently used go first and are rebuilt when asked for again.
    #[arg(long, default_value_t = graph_ascend_service::DEFAULT_MAX_INDEX_BYTES >> 20)]
    pub max_index_memory_mb: usize,
    /// Do not start a compare file's diagnosis when the page opens the file: only when the
    /// Diagnosis panel asks for it (saves its CPU time and memory, about 3 s and the result kept
    /// on a file of 1M nodes a side, for files whose panel is never opened; the panel's first
    /// answer then waits for it).
    #[arg(long)]
    pub no_diagnosis_prefetch: bool,
    /// The page's build (index.html and assets/), inlined into the reports the page downloads
    /// (default: where the wheel installs it beside this binary, as `report` finds it).
    #[arg(long, value_name = "DIR")]
    pub page_assets: Option<PathBuf>,
    /// Log filter, e.g. `info` or `graph_ascend_service=debug`.
    #[arg(long, default_value = "info")]
    pub log: String,
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&args.log)
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match serve(&args) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(err) => {
            let text = format!("{err:#}");
            if let Some(path) = &args.error_file {
                if let Err(e) = write_atomically(path, &format!("{text}\n")) {
                    tracing::error!("cannot write the error file {}: {e}", path.display());
                }
            }
            Err(err)
        }
    }
}

/// `mb` megabytes in bytes, for the memory bound set by `flag`.
/// Prefix of the temporary folder of the TensorBoard plugin (`python_shim`, `sidecar.py`):
/// `graph_ascend_tb_<host>.<pid>.<random>/`, the pid being TensorBoard's.
pub const SHIM_TEMP_PREFIX: &str = "graph_ascend_tb_";

fn megabytes(mb: usize, flag: &str) -> anyhow::Result<usize> {
    mb.checked_mul(1 << 20)
        .with_context(|| format!("{flag} is too large"))
}

fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    let logdir = args
        .logdir
        .canonicalize()
        .with_context(|| format!("logdir {} does not exist", args.logdir.display()))?;
    if !logdir.is_dir() {
        anyhow::bail!("logdir {} is not a directory", logdir.display());
    }
    if args.max_conversions == 0 {
        anyhow::bail!("--max-conversions must be at least 1");
    }
    // Read before the runtime's threads exist (and before `--die-after-stdin` watches stdin).
    let token_check = match args.tcp_port {
        Some(_) => Some(tcp_token_check()?),
        None => None,
    };
    let view_bytes = megabytes(args.max_view_memory_mb, "--max-view-memory-mb")?;
    let index_bytes = megabytes(args.max_index_memory_mb, "--max-index-memory-mb")?;
    // Without the page's build the reports cannot be downloaded; the page is served all the same.
    let page_assets = crate::report_cmd::find_assets(args.page_assets.as_deref())
        .map_err(|e| tracing::warn!("the page cannot download reports: {e:#}"))
        .ok();
    let state = Arc::new(
        State::with_max_conversions(logdir.clone(), args.max_conversions)
            .with_view_memory(view_bytes)
            .with_index_memory(index_bytes)
            .with_diagnosis_prefetch(!args.no_diagnosis_prefetch)
            .with_page_assets(page_assets),
    );
    // What killed conversions and writers left in the logdir goes at start, in the background
    // (the walk opens no file), and so does the temporary folder of a killed TensorBoard's
    // plugin.
    let cleaner = state.clone();
    let cleaning = std::thread::Builder::new()
        .name("graph-ascend-leftovers".into())
        .spawn(move || {
            cleaner.catalog.remove_leftovers();
            graph_ascend_visdb::stale::remove_stale(&std::env::temp_dir(), SHIM_TEMP_PREFIX);
        });
    if let Err(e) = cleaning {
        tracing::debug!("cannot start the cleaning of leftovers: {e}");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("graph-ascend")
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let shutdown = shutdown_signal(args.die_after_stdin);
        if let Some(port) = args.tcp_port {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                .await
                .with_context(|| format!("cannot listen on 127.0.0.1:{port}"))?;
            let addr = listener.local_addr()?;
            announce(args, &format!("127.0.0.1:{}", addr.port()))?;
            tracing::info!("serving {} on {addr}", logdir.display());
            let check = token_check.context("no token check for the TCP listener")?;
            server::run_checked(listener, state, check, shutdown).await?;
        } else {
            let parent = args
                .socket_parent
                .clone()
                .unwrap_or_else(std::env::temp_dir);
            let mut socket = PrivateSocket::bind(&parent)?;
            let listener = socket
                .take_listener()
                .context("the socket's listener was already taken")?;
            announce(args, &socket.path().display().to_string())?;
            tracing::info!(
                "serving {} on {}",
                logdir.display(),
                socket.path().display()
            );
            server::run(listener, state, shutdown).await?;
            drop(socket);
        }
        tracing::info!("stopped");
        anyhow::Ok(())
    })
}

/// The per-launch token: the first line of standard input. Not an environment variable, which
/// stays readable in `/proc/<pid>/environ` for the life of the process whatever the process
/// does with its copy; not the command line, which `ps` shows to everyone. The rest of standard
/// input is left to `--die-after-stdin` (std's stdin buffer is shared).
fn tcp_token_check() -> anyhow::Result<TokenCheck> {
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::stdin().lock(), &mut line)
        .context("cannot read the per-launch token from standard input")?;
    let token = line.trim_end_matches(['\r', '\n']);
    if token.is_empty() {
        anyhow::bail!(
            "--tcp-port needs a per-launch token as the first line of standard input (a TCP \
             port is open to every user of this machine); the TensorBoard plugin writes one"
        );
    }
    TokenCheck::require(token).context("the token read from standard input")
}

/// Tells the launcher where to connect: `<address>\n` in the ready file, written atomically
/// so that a reader never sees half a line.
fn announce(args: &ServeArgs, address: &str) -> anyhow::Result<()> {
    match &args.ready_file {
        Some(path) => write_atomically(path, &format!("{address}\n"))
            .with_context(|| format!("cannot write the ready file {}", path.display())),
        None => {
            println!("{address}");
            Ok(())
        }
    }
}

/// Completes on Ctrl-C, SIGTERM, or (with `--die-after-stdin`) when standard input closes.
async fn shutdown_signal(die_after_stdin: bool) {
    let stdin_closed = async {
        if die_after_stdin {
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            std::thread::spawn(move || {
                let mut sink = [0u8; 1024];
                let mut stdin = std::io::stdin().lock();
                loop {
                    match std::io::Read::read(&mut stdin, &mut sink) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                }
                let _ = tx.send(());
            });
            let _ = rx.await;
            tracing::info!("standard input closed: shutting down");
        } else {
            std::future::pending::<()>().await;
        }
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = stdin_closed => {}
        _ = terminate => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
