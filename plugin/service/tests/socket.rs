//! The real transport: gRPC over a private Unix socket, served in-process, shut down gracefully.

mod common;

use std::os::unix::fs::PermissionsExt;

use graph_ascend_proto as pb;
use graph_ascend_service::{run, PrivateSocket};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_over_a_private_unix_socket_and_shuts_down() {
    let (dir, state) = common::logdir_with("compare_tf_stats");
    let sockets = tempfile::tempdir().unwrap();
    let mut socket = PrivateSocket::bind(sockets.path()).unwrap();
    let path = socket.path().to_path_buf();
    let dir_mode = std::fs::metadata(path.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o700, "socket directory is private");
    let sock_mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(sock_mode & 0o777, 0o600, "socket is owner-only");

    let listener = socket.take_listener().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(run(listener, state, async {
        let _ = stopped.await;
    }));

    let mut client = common::connect(&path).await;

    let listing = client
        .load_meta_dir(pb::LoadMetaDirRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listing.data.len(), 1);
    let tag = listing.data[0].tags[0].clone();
    let root = client
        .change_node_expand_state(pb::NodeRequest {
            node_info: Some(pb::NodeRef {
                node_name: "root".into(),
                node_type: "Bench".into(),
            }),
            meta_data: Some(common::meta("run", &tag)),
            client_id: "socket-test".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(root.success, "{:?}", root.error);
    assert_eq!(root.data[0].name, "B___DefaultModel");
    assert!(root.data[0].is_root);

    // A bad request is an ordinary answer, not a gRPC error.
    let bad = client
        .save_data(pb::MetaRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(!bad.success);

    // A conversion over the socket: start, then the server-streamed progress to its end.
    copy_dir(
        &common::fixtures().join("dumps/mlp_stats"),
        &dir.path().join("mlp_stats"),
    );
    let started = client
        .convert_to_graph(pb::ConvertRequest {
            npu_path: "mlp_stats".into(),
            output_path: "conv_socket".into(),
            client_id: "socket-test".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(started.success, "{:?}", started.error);
    let mut stream = client
        .get_convert_progress(pb::ConvertProgressRequest {
            job_id: String::new(),
            client_id: "socket-test".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut last = None;
    while let Some(event) =
        tokio::time::timeout(std::time::Duration::from_secs(60), stream.message())
            .await
            .expect("progress events keep coming")
            .unwrap()
    {
        last = Some(event);
    }
    let last = last.expect("at least one event");
    assert_eq!(last.status, "done", "{last:?}");
    assert_eq!(last.job_id, started.job_id);

    drop(client);
    stop_server(stop, server).await;
    drop(socket);
    assert!(!path.exists(), "socket removed on exit");
    drop(dir);
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

/// Regression: the socket folders of killed sidecars stayed forever. Binding
/// removes those of this host's dead processes, and nothing else.
#[tokio::test]
async fn binding_removes_the_socket_folders_of_killed_sidecars() {
    use graph_ascend_service::server::SOCKET_DIR_PREFIX;
    let parent = tempfile::tempdir().unwrap();
    let dead = graph_ascend_visdb::stale::dead_owner_tag();
    let stale = parent.path().join(format!("{SOCKET_DIR_PREFIX}{dead}.0"));
    let other_host = parent
        .path()
        .join(format!("{SOCKET_DIR_PREFIX}other{dead}.0"));
    let live = parent.path().join(format!(
        "{SOCKET_DIR_PREFIX}{}.7",
        graph_ascend_visdb::stale::owner_tag()
    ));
    for d in [&stale, &other_host, &live] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("sidecar.sock"), b"").unwrap();
    }
    let socket = PrivateSocket::bind(parent.path()).unwrap();
    assert!(socket.path().starts_with(parent.path()));
    assert!(!stale.exists(), "a dead sidecar's folder is removed");
    assert!(other_host.exists() && live.exists());
}

/// The loopback TCP fallback, through a real TCP socket: a request without the per-launch token,
/// or with a wrong one, is refused (UNAUTHENTICATED) before any handler runs; with it, it is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_requires_the_per_launch_token() {
    use graph_ascend_service::server::{run_checked, TokenCheck, TOKEN_METADATA};

    let (_dir, state) = common::logdir_with("compare_tf_stats");
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let token = "k".repeat(20) + "0123456789abcdefghijklmnopqrstuv";
    let check = TokenCheck::require(&token).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(run_checked(listener, state, check, async {
        let _ = stopped.await;
    }));
    let channel = tonic::transport::Endpoint::try_from(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();

    let with = |value: Option<&str>| {
        let mut request = tonic::Request::new(pb::LoadMetaDirRequest::default());
        if let Some(v) = value {
            request
                .metadata_mut()
                .insert(TOKEN_METADATA, v.parse().unwrap());
        }
        request
    };
    let mut client = pb::graph_ascend_client::GraphAscendClient::new(channel.clone());
    let missing = client.load_meta_dir(with(None)).await.unwrap_err();
    assert_eq!(missing.code(), tonic::Code::Unauthenticated, "{missing:?}");
    assert!(missing.message().contains(TOKEN_METADATA), "{missing:?}");
    let wrong = token.replace('k', "K");
    let refused = client.load_meta_dir(with(Some(&wrong))).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    let short = client.load_meta_dir(with(Some("k"))).await.unwrap_err();
    assert_eq!(short.code(), tonic::Code::Unauthenticated, "{short:?}");
    // The browser's path (CallJson) is guarded the same way.
    let call = pb::JsonCall {
        method: "LoadMetaDir".into(),
        request: Vec::new(),
    };
    let json = client
        .call_json(tonic::Request::new(call.clone()))
        .await
        .unwrap_err();
    assert_eq!(json.code(), tonic::Code::Unauthenticated, "{json:?}");

    let listing = client
        .load_meta_dir(with(Some(&token)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listing.data.len(), 1);
    let mut call_request = tonic::Request::new(call);
    call_request
        .metadata_mut()
        .insert(TOKEN_METADATA, token.parse().unwrap());
    let answer = client.call_json(call_request).await.unwrap().into_inner();
    assert!(String::from_utf8_lossy(&answer.json).contains("\"run\""));

    stop_server(stop, server).await;
}

/// Asks a server started with `run`/`run_checked` to stop, and waits until it has.
async fn stop_server(
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<Result<(), graph_ascend_service::ServeError>>,
) {
    stop.send(()).unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(10), server)
        .await
        .expect("server stops after shutdown")
        .unwrap()
        .unwrap();
}

#[test]
fn weak_tokens_are_refused() {
    use graph_ascend_service::server::TokenCheck;
    assert!(TokenCheck::require("short").is_err());
    assert!(TokenCheck::require(&" ".repeat(40)).is_err(), "spaces");
    assert!(TokenCheck::require(&"é".repeat(40)).is_err(), "not ASCII");
    assert!(TokenCheck::require(&"a".repeat(32)).is_ok());
}
