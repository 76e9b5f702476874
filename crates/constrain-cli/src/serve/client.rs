//! The HTTP client that `constrain bench-serve` and the tests use (a thin layer over
//! [`ureq`]: plain HTTP, loopback servers), and a guard that runs `constrain serve` as a child
//! process.
//!
//! [`request`] reads the whole response; [`open_stream`] returns the response as soon as its
//! head arrives, so a caller can read an event stream piece by piece or hang up mid-stream.
//! Statuses are never errors here: a 4xx or 5xx is a [`Response`] like any other.
use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A response: status, headers (lower-case names) and body.
#[derive(Clone, Debug)]
pub struct Response {
    /// HTTP status code.
    pub status: u16,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body (decoded if it was chunked).
    pub body: String,
}

impl Response {
    /// The body as JSON.
    pub fn json(&self) -> anyhow::Result<Value> {
        serde_json::from_str(&self.body).map_err(|e| anyhow::anyhow!("body is not JSON ({e}): {}", self.body))
    }

    /// The `data:` payloads of an event stream, in order.
    pub fn sse_data(&self) -> Vec<String> {
        self.body.lines().filter_map(|l| l.strip_prefix("data:")).map(|d| d.trim_start().to_string()).collect()
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// A response whose body is still arriving: read it with [`Stream::next_data`] or
/// [`Stream::read_rest`], or drop it to hang up.
pub struct Stream {
    /// HTTP status code.
    pub status: u16,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    body: BufReader<ureq::BodyReader<'static>>,
}

impl Stream {
    /// The next `data:` payload of an event stream, `None` at its end.
    pub fn next_data(&mut self) -> anyhow::Result<Option<String>> {
        let mut line = String::new();
        loop {
            line.clear();
            if self.body.read_line(&mut line)? == 0 {
                return Ok(None);
            }
            if let Some(data) = line.trim_end().strip_prefix("data:") {
                return Ok(Some(data.trim_start().to_string()));
            }
        }
    }

    /// Reads the rest of the body.
    pub fn read_rest(mut self) -> anyhow::Result<Response> {
        let mut raw = Vec::new();
        self.body.read_to_end(&mut raw)?;
        Ok(Response { status: self.status, headers: self.headers, body: String::from_utf8_lossy(&raw).into_owned() })
    }
}

/// The most body a [`request`] reads (64 MiB): far above anything the server sends.
const MAX_BODY: u64 = 64 << 20;

/// One agent per call: no connection is kept between calls, as a fresh client would do.
fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .max_idle_connections(0)
        .build()
        .into()
}

/// Sends `method path` to `addr` (`host:port`) with the given extra headers and body, and
/// returns once the response's head has arrived.
pub fn open_stream(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeout: Duration,
) -> anyhow::Result<Stream> {
    let mut builder = ureq::http::Request::builder().method(method).uri(format!("http://{addr}{path}"));
    if body.is_some() {
        builder = builder.header("content-type", "application/json");
    }
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let response = match body {
        Some(body) => agent(timeout).run(builder.body(body)?),
        None => agent(timeout).run(builder.body(())?),
    }?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().to_ascii_lowercase(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    let body = response.into_body().into_with_config().limit(MAX_BODY).reader();
    Ok(Stream { status, headers, body: BufReader::new(body) })
}

/// Sends one request to `addr` (`host:port`) and reads the whole response.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
    timeout: Duration,
) -> anyhow::Result<Response> {
    open_stream(addr, method, path, &[], body, timeout)?.read_rest()
}

/// POSTs `body` as JSON.
pub fn post_json(addr: &str, path: &str, body: &Value, timeout: Duration) -> anyhow::Result<Response> {
    request(addr, "POST", path, Some(body.to_string().as_bytes()), timeout)
}

/// The flags of a command that starts its own `constrain serve` ([`Server::spawn_own`]).
#[derive(clap::Args, Debug, Clone)]
pub struct OwnServer {
    /// `--parallel` of the server started here.
    #[arg(long, default_value_t = 8)]
    pub parallel: usize,
    /// GGUF model of the server started here.
    #[arg(short = 'm', long)]
    pub model: Option<std::path::PathBuf>,
    /// CPU threads of the server started here [default: all cores].
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
}

/// A `constrain serve` child process, killed when dropped (also when a test panics).
pub struct Server {
    child: Child,
    /// `host:port` it listens on.
    pub addr: String,
    /// Its stderr lines after the "listening on" line, the newest [`Server::KEPT_LINES`].
    lines: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Starts `exe serve --port 0 ARGS…` and waits (up to `timeout`) for its
    /// "listening on" line.
    pub fn spawn(exe: &Path, args: &[&str], timeout: Duration) -> anyhow::Result<Server> {
        let mut child = Command::new(exe)
            .arg("serve")
            .args(["--host", "127.0.0.1", "--port", "0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = child.stderr.take().ok_or_else(|| anyhow::anyhow!("no stderr"))?;
        let (tx, rx) = std::sync::mpsc::channel();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let kept = lines.clone();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent {
                    if let Some(addr) = line.split("listening on http://").nth(1) {
                        let _ = tx.send(Ok(addr.trim().to_string()));
                        sent = true;
                        continue;
                    }
                }
                eprintln!("[server] {line}");
                if sent {
                    if let Ok(mut kept) = kept.lock() {
                        if kept.len() == Server::KEPT_LINES {
                            kept.remove(0);
                        }
                        kept.push(line);
                    }
                }
            }
            if !sent {
                let _ = tx.send(Err(anyhow::anyhow!("the server exited before listening")));
            }
        });
        let start = Instant::now();
        let addr = rx.recv_timeout(timeout);
        let mut server = Server { child, addr: String::new(), lines };
        match addr {
            Ok(Ok(addr)) => server.addr = addr,
            Ok(Err(e)) => return Err(e),
            Err(_) => anyhow::bail!("the server did not start within {:?}", start.elapsed()),
        }
        Ok(server)
    }

    /// Starts this executable's `serve` (as [`Server::spawn`]) as `own` says: the server of
    /// `bench-serve` and `soak`.
    pub fn spawn_own(own: &OwnServer) -> anyhow::Result<Server> {
        let exe = std::env::current_exe()?;
        let mut args = vec!["--parallel".to_string(), own.parallel.to_string()];
        if let Some(m) = &own.model {
            args.extend(["-m".to_string(), m.display().to_string()]);
        }
        if let Some(t) = own.threads {
            args.extend(["-t".to_string(), t.to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Server::spawn(&exe, &args, Duration::from_secs(120))
    }

    /// Stderr lines kept at most (the oldest are dropped).
    pub const KEPT_LINES: usize = 10_000;

    /// What the server has written on stderr since it started listening, a line each (its
    /// logs): for tests of what a server says.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.lines.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The process id (to send it a signal).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to `timeout` for the process to exit: `Some(exit code)` (`None` inside if a
    /// signal ended it), or `None` if it is still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<Option<i32>> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status.code());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
