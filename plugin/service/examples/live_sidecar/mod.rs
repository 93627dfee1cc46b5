//! A live sidecar for the examples that measure one (`quick_wait`, `abuse_run`): `BINARY serve`
//! on a logdir, and clients over its private socket.

// Each example uses the part it needs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use graph_ascend_proto as pb;

pub type Client = pb::graph_ascend_client::GraphAscendClient<tonic::transport::Channel>;

/// A running `serve`, killed when dropped.
pub struct Sidecar {
    child: Child,
    pub socket: PathBuf,
}

impl Sidecar {
    /// Starts `binary serve --logdir logdir` and waits (up to 30 s) for its socket.
    pub async fn start(
        binary: &Path,
        logdir: &Path,
        work: &Path,
    ) -> Result<Sidecar, Box<dyn std::error::Error>> {
        let ready = work.join("ready");
        let child = Command::new(binary)
            .arg("serve")
            .arg("--logdir")
            .arg(logdir)
            .arg("--ready-file")
            .arg(&ready)
            .arg("--log")
            .arg("warn")
            .stdin(Stdio::null())
            .spawn()?;
        let mut sidecar = Sidecar {
            child,
            socket: PathBuf::new(),
        };
        let started = Instant::now();
        loop {
            if let Ok(text) = std::fs::read_to_string(&ready) {
                if let Some(line) = text.strip_suffix('\n') {
                    sidecar.socket = PathBuf::from(line);
                    return Ok(sidecar);
                }
            }
            if started.elapsed() > Duration::from_secs(30) {
                return Err("the sidecar did not start within 30 s".into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The process's peak resident memory so far (`VmHWM`), in KB.
    pub fn peak_kb(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    pub async fn connect(&self) -> Result<Client, Box<dyn std::error::Error>> {
        let path = self.socket.clone();
        let channel = tonic::transport::Endpoint::try_from("http://localhost")?
            .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
                let p = path.clone();
                async move {
                    let stream = tokio::net::UnixStream::connect(p).await?;
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
                }
            }))
            .await?;
        Ok(pb::graph_ascend_client::GraphAscendClient::new(channel)
            .max_decoding_message_size(usize::MAX))
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The page's selection of `run` (tag = run), step 0, rank 0.
pub fn meta(run: &str) -> pb::MetaData {
    pb::MetaData {
        run: run.into(),
        tag: run.into(),
        r#type: "db".into(),
        lang: "en".into(),
        micro_step: Some(-1),
        step: Some(0),
        rank: Some(0),
    }
}

/// One `CallJson` call: its time, and its answer's JSON when it was answered at all.
pub async fn call(
    client: &mut Client,
    method: &str,
    request: Vec<u8>,
) -> (Duration, Option<Vec<u8>>) {
    let started = Instant::now();
    let answer = client
        .call_json(pb::JsonCall {
            method: method.into(),
            request,
        })
        .await
        .ok()
        .map(|a| a.into_inner().json);
    (started.elapsed(), answer)
}
