//! Serving: the tonic server over any stream of connections, with graceful shutdown, the
//! private Unix socket the Python shim connects to, and the per-launch token that guards the
//! loopback TCP fallback (a TCP port, unlike the socket, is open to every local user).

use std::future::Future;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use graph_ascend_proto::graph_ascend_server::GraphAscendServer;
use tokio::net::{TcpListener, UnixListener};
use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};
use tokio_stream::Stream;
use tonic::transport::server::Connected;

use crate::service::GraphService;
use crate::state::State;

/// Largest message either way (a node list of a million names is tens of megabytes).
pub const MAX_MESSAGE_BYTES: usize = 1 << 30;

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot create the socket directory {path}: {source}")]
    SocketDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot listen on {path}: {source}")]
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
    #[error("the access token must be at least {MIN_TOKEN_CHARS} printable ASCII characters")]
    WeakToken,
}

/// The gRPC metadata key that carries the per-launch token over TCP.
pub const TOKEN_METADATA: &str = "x-graph-ascend-token";
/// Shortest token accepted (the shim sends 43 characters: 32 random bytes, base64url).
pub const MIN_TOKEN_CHARS: usize = 32;

/// Who may call: everyone who can reach the listener (the private Unix socket: only its owner),
/// or only callers that present the per-launch token (loopback TCP). A tonic interceptor.
#[derive(Clone, Default)]
pub struct TokenCheck {
    token: Option<Arc<[u8]>>,
}

impl TokenCheck {
    /// No token: for the private Unix socket, whose folder only its owner can enter.
    pub fn open() -> TokenCheck {
        TokenCheck { token: None }
    }

    /// Every request must carry `token` in the [`TOKEN_METADATA`] metadata.
    pub fn require(token: &str) -> Result<TokenCheck, ServeError> {
        let printable = token.bytes().all(|b| b.is_ascii_graphic());
        if token.len() < MIN_TOKEN_CHARS || !printable {
            return Err(ServeError::WeakToken);
        }
        Ok(TokenCheck {
            token: Some(Arc::from(token.as_bytes())),
        })
    }
}

impl tonic::service::Interceptor for TokenCheck {
    fn call(&mut self, request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        let Some(expected) = &self.token else {
            return Ok(request);
        };
        match request.metadata().get(TOKEN_METADATA) {
            Some(given) if same_bytes(given.as_bytes(), expected) => Ok(request),
            Some(_) => Err(tonic::Status::unauthenticated(format!(
                "the {TOKEN_METADATA} metadata does not match this sidecar's token"
            ))),
            None => Err(tonic::Status::unauthenticated(format!(
                "this sidecar listens on TCP: every request must carry its per-launch token in the \
                 {TOKEN_METADATA} metadata"
            ))),
        }
    }
}

/// Equality whose time does not depend on where two equally long strings differ.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Prefix of the private socket folders.
pub const SOCKET_DIR_PREFIX: &str = "graph-ascend-";

/// A Unix socket in a fresh directory only its owner can enter; removed on drop.
pub struct PrivateSocket {
    dir: PathBuf,
    path: PathBuf,
    listener: Option<UnixListener>,
}

impl PrivateSocket {
    /// Creates `<parent>/graph-ascend-<host>.<pid>.<n>/` with mode 0700 and binds `sidecar.sock`
    /// (0600) in it, after removing the folders of sidecars of this host that were killed.
    /// Must be called inside a tokio runtime.
    pub fn bind(parent: &Path) -> Result<PrivateSocket, ServeError> {
        graph_ascend_visdb::stale::remove_stale(parent, SOCKET_DIR_PREFIX);
        let owner = graph_ascend_visdb::stale::owner_tag();
        let mut n = 0u32;
        let dir = loop {
            let candidate = parent.join(format!("{SOCKET_DIR_PREFIX}{owner}.{n}"));
            match std::fs::DirBuilder::new().mode(0o700).create(&candidate) {
                Ok(()) => break candidate,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
                Err(source) => {
                    return Err(ServeError::SocketDir {
                        path: candidate,
                        source,
                    })
                }
            }
        };
        let path = dir.join("sidecar.sock");
        let listener = UnixListener::bind(&path).map_err(|source| ServeError::Bind {
            path: path.clone(),
            source,
        })?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(
            |source| ServeError::Bind {
                path: path.clone(),
                source,
            },
        )?;
        Ok(PrivateSocket {
            dir,
            path,
            listener: Some(listener),
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Takes the listener (once).
    pub fn take_listener(&mut self) -> Option<UnixListener> {
        self.listener.take()
    }
}

impl Drop for PrivateSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A listener the server accepts connections from: the private Unix socket, or loopback TCP
/// (the fallback where Unix sockets are unavailable).
pub trait Listener {
    /// The accepted connections.
    type Incoming: Stream<Item = std::io::Result<Self::Connection>> + Send + 'static;
    /// One connection.
    type Connection: Connected
        + tokio::io::AsyncRead
        + tokio::io::AsyncWrite
        + Unpin
        + Send
        + 'static;
    fn incoming(self) -> Self::Incoming;
}

impl Listener for UnixListener {
    type Incoming = UnixListenerStream;
    type Connection = tokio::net::UnixStream;
    fn incoming(self) -> Self::Incoming {
        UnixListenerStream::new(self)
    }
}

impl Listener for TcpListener {
    type Incoming = TcpListenerStream;
    type Connection = tokio::net::TcpStream;
    fn incoming(self) -> Self::Incoming {
        TcpListenerStream::new(self)
    }
}

/// Serves the API on `listener` until `shutdown` completes, then finishes in-flight requests,
/// to every caller that reaches the listener: for the private Unix socket.
/// Tests start it in-process on a fresh socket.
pub async fn run<L: Listener>(
    listener: L,
    state: Arc<State>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError>
where
    <L::Connection as Connected>::ConnectInfo: Clone + Send + Sync + 'static,
{
    run_checked(listener, state, TokenCheck::open(), shutdown).await
}

/// [`run`], answering only the requests `check` admits (the others: UNAUTHENTICATED).
pub async fn run_checked<L: Listener>(
    listener: L,
    state: Arc<State>,
    check: TokenCheck,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError>
where
    <L::Connection as Connected>::ConnectInfo: Clone + Send + Sync + 'static,
{
    let service = GraphAscendServer::new(GraphService::new(state))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let service = tonic::service::interceptor::InterceptedService::new(service, check);
    tonic::transport::Server::builder()
        .add_service(service)
        .serve_with_incoming_shutdown(listener.incoming(), shutdown)
        .await?;
    Ok(())
}
