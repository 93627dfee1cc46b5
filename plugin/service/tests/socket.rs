//! The real transport: gRPC over a private Unix socket, served in-process, shut down gracefully.

mod common;

use std::os::unix::fs::PermissionsExt;

use graph_ascend_proto as pb;
use graph_ascend_service::server::{run, PrivateSocket};
use pb::graph_ascend_client::GraphAscendClient;

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

    let connect_path = path.clone();
    let channel = tonic::transport::Endpoint::try_from("http://localhost")
        .unwrap()
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let p = connect_path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(p).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await
        .unwrap();
    let mut client = GraphAscendClient::new(channel);

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

    // Routes not built yet say so as a gRPC status, which the shim turns into a clear error.
    let err = client
        .save_data(pb::MetaRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unimplemented);

    drop(client);
    stop.send(()).unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(10), server)
        .await
        .expect("server stops after shutdown")
        .unwrap()
        .unwrap();
    drop(socket);
    assert!(!path.exists(), "socket removed on exit");
    drop(dir);
}
