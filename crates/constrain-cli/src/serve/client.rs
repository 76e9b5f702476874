//! A tiny blocking HTTP/1.1 client for loopback servers, and a guard that runs
//! `constrain serve` as a child process: what `constrain bench-serve` and the tests use.
//!
//! One request per connection (`Connection: close`), the whole response read before it is
//! returned (chunked bodies decoded); Server-Sent Events are split into their `data:` lines
//! by [`Response::sse_data`]. Not a general client: no TLS, no redirects, no keep-alive.
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
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

/// Sends one request to `addr` (`host:port`) and reads the whole response.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
    timeout: Duration,
) -> anyhow::Result<Response> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let body = body.unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    // A server may answer (413) before reading a large body and close: not an error here.
    let _ = stream.write_all(body);
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("bad status line {line:?}"))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((n, v)) = l.split_once(':') {
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let chunked = headers.iter().any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    let mut raw = Vec::new();
    if chunked {
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                break;
            }
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| anyhow::anyhow!("bad chunk size {line:?}"))?;
            if size == 0 {
                break;
            }
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            chunk.truncate(size);
            raw.extend_from_slice(&chunk);
        }
    } else {
        reader.read_to_end(&mut raw)?;
    }
    Ok(Response { status, headers, body: String::from_utf8_lossy(&raw).into_owned() })
}

/// POSTs `body` as JSON.
pub fn post_json(addr: &str, path: &str, body: &Value, timeout: Duration) -> anyhow::Result<Response> {
    request(addr, "POST", path, Some(body.to_string().as_bytes()), timeout)
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
