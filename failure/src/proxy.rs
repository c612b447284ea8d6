//! A loopback TCP proxy for fault injection.
//!
//! [`Proxy::start`] listens on `127.0.0.1:<free port>` and forwards every
//! connection it accepts to one upstream address (a PostgreSQL cluster, say).
//! Clients connect to [`Proxy::addr`] instead of the server, and a test can
//! then, at any moment:
//!
//! - [`Proxy::cut`] every current connection abruptly: both sockets (the
//!   client's and the upstream's) are closed with a TCP reset, as when a
//!   network path dies or a middlebox drops state. New connections are
//!   accepted as before.
//! - [`Proxy::close`] every current connection cleanly: both sockets are
//!   closed with a FIN (end-of-stream), as when a middlebox or a peer
//!   closes an idle connection in an orderly way.
//! - [`Proxy::set_blackhole`]: stop forwarding in both directions without
//!   closing anything. Bytes stay queued in the proxy and the kernel; the
//!   peers see a silent, stalled connection (a client-side timeout is the
//!   only way out). Turning it off resumes forwarding, and what was held is
//!   delivered.
//!
//! Dropping the proxy stops accepting and resets every connection.
//!
//! Needs a tokio runtime (multi-threaded or current-thread); every
//! connection is served by its own task on it.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

const BUFFER: usize = 16 * 1024;

/// A running proxy; see the [module docs](self).
pub struct Proxy {
    addr: SocketAddr,
    upstream: SocketAddr,
    inner: Arc<Inner>,
    accept: JoinHandle<()>,
}

struct Inner {
    /// `true` while forwarding is stopped.
    blackhole: watch::Sender<bool>,
    /// Live connections by id: how to kill each, and its task.
    conns: Mutex<HashMap<u64, Conn>>,
    next_id: AtomicU64,
    accepted: AtomicU64,
}

/// How a connection is ended on request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    /// TCP reset on both sides.
    Reset,
    /// Orderly close (FIN) on both sides.
    Close,
}

struct Conn {
    kill: oneshot::Sender<Ending>,
    task: Option<JoinHandle<()>>,
}

impl Inner {
    /// The registry; a panic elsewhere while it was held leaves it usable.
    fn conns(&self) -> MutexGuard<'_, HashMap<u64, Conn>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("addr", &self.addr)
            .field("upstream", &self.upstream)
            .field("blackhole", &self.is_blackholed())
            .field("live", &self.live_connections())
            .finish()
    }
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> io::Result<Proxy> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let (blackhole, _) = watch::channel(false);
        let inner = Arc::new(Inner {
            blackhole,
            conns: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            accepted: AtomicU64::new(0),
        });
        let accept = tokio::spawn(accept_loop(listener, upstream, Arc::clone(&inner)));
        Ok(Proxy {
            addr,
            upstream,
            inner,
            accept,
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where connections are forwarded to.
    pub fn upstream(&self) -> SocketAddr {
        self.upstream
    }

    /// Resets every current connection (both sides get a TCP RST) and waits
    /// until they are all closed. Returns how many there were. The proxy
    /// keeps accepting new connections.
    pub async fn cut(&self) -> usize {
        self.end_all(Ending::Reset).await
    }

    /// Closes every current connection in an orderly way (both sides see
    /// end-of-stream) and waits until they are all closed. Returns how many
    /// there were. The proxy keeps accepting new connections.
    pub async fn close(&self) -> usize {
        self.end_all(Ending::Close).await
    }

    /// Resets the connection that has been live the longest (both sides get a TCP RST)
    /// and waits until it is closed, leaving the others as they are: one session's
    /// connection cut, not the whole network's. Returns how many it reset (0 or 1).
    pub async fn cut_oldest(&self) -> usize {
        let victim = {
            let mut conns = self.inner.conns();
            let oldest = conns.keys().min().copied();
            oldest.and_then(|id| conns.remove(&id))
        };
        self.end(victim.into_iter().collect(), Ending::Reset).await
    }

    async fn end_all(&self, ending: Ending) -> usize {
        let victims: Vec<Conn> = self.inner.conns().drain().map(|(_, c)| c).collect();
        self.end(victims, ending).await
    }

    /// Tells each of `victims` (already out of the registry) to end so, and waits for them.
    async fn end(&self, victims: Vec<Conn>, ending: Ending) -> usize {
        let count = victims.len();
        let mut tasks = Vec::with_capacity(count);
        for mut conn in victims {
            // The task may already be finishing; then there is nobody to tell.
            let _ = conn.kill.send(ending);
            if let Some(task) = conn.task.take() {
                tasks.push(task);
            }
        }
        for task in tasks {
            // A task that panicked or was aborted has closed its sockets too.
            let _ = task.await;
        }
        count
    }

    /// Stops (`true`) or resumes (`false`) forwarding on every connection,
    /// current and future, without closing any.
    pub fn set_blackhole(&self, on: bool) {
        self.inner.blackhole.send_replace(on);
    }

    pub fn is_blackholed(&self) -> bool {
        *self.inner.blackhole.borrow()
    }

    /// Connections currently being forwarded (or held).
    pub fn live_connections(&self) -> usize {
        self.inner.conns().len()
    }

    /// Connections accepted since the start.
    pub fn accepted(&self) -> u64 {
        self.inner.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        for (_, conn) in self.inner.conns().drain() {
            let _ = conn.kill.send(Ending::Reset);
        }
    }
}

async fn accept_loop(listener: TcpListener, upstream: SocketAddr, inner: Arc<Inner>) {
    loop {
        let inbound = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of descriptors or a connection aborted before accept:
                // do not spin, try again shortly.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        inner.accepted.fetch_add(1, Ordering::Relaxed);
        let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (kill, killed) = oneshot::channel();
        // Hold the registry while spawning so that the task's own removal
        // (at its end) cannot run before it is registered.
        let mut conns = inner.conns();
        let task = tokio::spawn(serve(
            id,
            inbound,
            upstream,
            killed,
            inner.blackhole.subscribe(),
            Arc::clone(&inner),
        ));
        conns.insert(
            id,
            Conn {
                kill,
                task: Some(task),
            },
        );
    }
}

/// How a connection ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// Both directions reached end-of-stream: close normally.
    Clean,
    /// One side failed, or we were told to cut: reset both.
    Abort,
}

async fn serve(
    id: u64,
    mut inbound: TcpStream,
    upstream: SocketAddr,
    mut killed: oneshot::Receiver<Ending>,
    blackhole: watch::Receiver<bool>,
    inner: Arc<Inner>,
) {
    let _ = inbound.set_nodelay(true);
    let outbound = tokio::select! {
        biased;
        _ = &mut killed => None,
        outbound = TcpStream::connect(upstream) => outbound.ok(),
    };
    let end = match outbound {
        Some(mut outbound) => {
            let _ = outbound.set_nodelay(true);
            let end = forward(&mut inbound, &mut outbound, killed, blackhole).await;
            if end == End::Abort {
                let _ = outbound.set_zero_linger();
            }
            end
        }
        // Cut before the upstream answered, or the upstream refused.
        None => End::Abort,
    };
    if end == End::Abort {
        let _ = inbound.set_zero_linger();
    }
    inner.conns().remove(&id);
    // Dropping the streams here closes them: with a zero linger, by a reset.
}

async fn forward(
    inbound: &mut TcpStream,
    outbound: &mut TcpStream,
    mut killed: oneshot::Receiver<Ending>,
    blackhole: watch::Receiver<bool>,
) -> End {
    let (mut in_read, mut in_write) = inbound.split();
    let (mut out_read, mut out_write) = outbound.split();
    let both = async {
        tokio::try_join!(
            pump(&mut in_read, &mut out_write, blackhole.clone()),
            pump(&mut out_read, &mut in_write, blackhole.clone()),
        )
    };
    tokio::select! {
        // A cut wins over forwarding whatever is ready at the same moment.
        biased;
        // A dropped sender (the proxy is gone) is a reset too.
        ending = &mut killed => match ending {
            Ok(Ending::Close) => End::Clean,
            _ => End::Abort,
        },
        result = both => if result.is_ok() { End::Clean } else { End::Abort },
    }
}

/// Copies from `from` to `to` until end-of-stream, holding data while the
/// blackhole is on; at end-of-stream, half-closes `to`.
async fn pump<R, W>(
    from: &mut R,
    to: &mut W,
    mut blackhole: watch::Receiver<bool>,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; BUFFER];
    loop {
        open(&mut blackhole).await;
        let n = from.read(&mut buf).await?;
        if n == 0 {
            // The peer finished sending; pass the half-close on.
            let _ = to.shutdown().await;
            return Ok(());
        }
        open(&mut blackhole).await;
        to.write_all(&buf[..n]).await?;
    }
}

/// Waits until forwarding is allowed.
async fn open(blackhole: &mut watch::Receiver<bool>) {
    while *blackhole.borrow_and_update() {
        if blackhole.changed().await.is_err() {
            // The proxy is gone; its drop resets this connection anyway.
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    use tokio::time::timeout;

    /// An echo server on loopback; returns its address.
    async fn echo_server() -> SocketAddr {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = stream.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    async fn roundtrip(stream: &mut TcpStream, msg: &[u8]) -> io::Result<Vec<u8>> {
        stream.write_all(msg).await?;
        let mut back = vec![0u8; msg.len()];
        stream.read_exact(&mut back).await?;
        Ok(back)
    }

    async fn wait_for(what: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !what() {
            assert!(Instant::now() < deadline, "condition not reached in 5s");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn forwards_both_ways_and_counts() {
        let proxy = Proxy::start(echo_server().await).await.unwrap();
        let mut a = TcpStream::connect(proxy.addr()).await.unwrap();
        let mut b = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(roundtrip(&mut a, b"hello").await.unwrap(), b"hello");
        assert_eq!(roundtrip(&mut b, b"world").await.unwrap(), b"world");
        // Larger than the buffer, written and read concurrently.
        let big: Vec<u8> = (0..(1u32 << 20)).map(|i| (i % 251) as u8).collect();
        let (mut r, mut w) = a.split();
        let mut back = vec![0u8; big.len()];
        let (wrote, read) = tokio::join!(w.write_all(&big), r.read_exact(&mut back));
        wrote.unwrap();
        read.unwrap();
        assert_eq!(back, big);
        assert_eq!(proxy.accepted(), 2);
        assert_eq!(proxy.live_connections(), 2);
        drop(a);
        wait_for(|| proxy.live_connections() == 1).await;
    }

    #[tokio::test]
    async fn cut_resets_current_connections_and_keeps_accepting() {
        let proxy = Proxy::start(echo_server().await).await.unwrap();
        let mut a = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(roundtrip(&mut a, b"x").await.unwrap(), b"x");
        assert_eq!(proxy.cut().await, 1);
        assert_eq!(proxy.live_connections(), 0);
        let mut buf = [0u8; 1];
        let read = timeout(Duration::from_secs(5), a.read(&mut buf))
            .await
            .expect("a cut connection must not hang");
        let err = read.expect_err("a cut is a reset, not an end-of-stream");
        assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
        let mut b = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(roundtrip(&mut b, b"again").await.unwrap(), b"again");
    }

    /// One connection cut: the oldest is reset, the younger one still forwards.
    #[tokio::test]
    async fn cut_oldest_resets_one_connection_and_spares_the_others() {
        let proxy = Proxy::start(echo_server().await).await.unwrap();
        let mut old = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(roundtrip(&mut old, b"x").await.unwrap(), b"x");
        let mut young = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(roundtrip(&mut young, b"y").await.unwrap(), b"y");
        assert_eq!(proxy.cut_oldest().await, 1);
        assert_eq!(proxy.live_connections(), 1);
        let mut buf = [0u8; 1];
        let read = timeout(Duration::from_secs(5), old.read(&mut buf))
            .await
            .expect("a cut connection must not hang");
        assert_eq!(
            read.map_err(|e| e.kind()),
            Err(io::ErrorKind::ConnectionReset)
        );
        assert_eq!(roundtrip(&mut young, b"still").await.unwrap(), b"still");
        assert_eq!(proxy.cut_oldest().await, 1);
        assert_eq!(proxy.cut_oldest().await, 0, "no connection is left to cut");
    }

    #[tokio::test]
    async fn close_ends_current_connections_cleanly_and_keeps_accepting() {
        let proxy = Proxy::start(echo_server().await).await.unwrap();
        let mut a = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(roundtrip(&mut a, b"x").await.unwrap(), b"x");
        assert_eq!(proxy.close().await, 1);
        assert_eq!(proxy.live_connections(), 0);
        let mut buf = [0u8; 1];
        let read = timeout(Duration::from_secs(5), a.read(&mut buf))
            .await
            .expect("a closed connection must not hang");
        // Negative control of `cut`: a clean close is an end-of-stream, not a reset.
        assert_eq!(read.expect("a clean close is no error"), 0);
        let mut b = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(roundtrip(&mut b, b"again").await.unwrap(), b"again");
    }

    #[tokio::test]
    async fn blackhole_holds_data_without_closing() {
        let proxy = Proxy::start(echo_server().await).await.unwrap();
        let mut a = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(roundtrip(&mut a, b"1").await.unwrap(), b"1");
        proxy.set_blackhole(true);
        assert!(proxy.is_blackholed());
        let stalled = timeout(Duration::from_millis(300), roundtrip(&mut a, b"2")).await;
        assert!(stalled.is_err(), "nothing may come through a blackhole");
        assert_eq!(proxy.live_connections(), 1);
        proxy.set_blackhole(false);
        // The held byte is delivered once forwarding resumes.
        let mut back = [0u8; 1];
        timeout(Duration::from_secs(5), a.read_exact(&mut back))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&back, b"2");
    }

    #[tokio::test]
    async fn refused_upstream_resets_the_client() {
        // A port nobody listens on: bind, note it, close.
        let free = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .unwrap()
            .local_addr()
            .unwrap();
        let proxy = Proxy::start(free).await.unwrap();
        let mut a = TcpStream::connect(proxy.addr()).await.unwrap();
        let mut buf = [0u8; 1];
        let read = timeout(Duration::from_secs(5), a.read(&mut buf))
            .await
            .unwrap();
        assert!(read.is_err(), "expected a reset, got {read:?}");
        wait_for(|| proxy.live_connections() == 0).await;
    }

    #[tokio::test]
    async fn drop_resets_connections() {
        let proxy = Proxy::start(echo_server().await).await.unwrap();
        let addr = proxy.addr();
        let mut a = TcpStream::connect(addr).await.unwrap();
        assert_eq!(roundtrip(&mut a, b"x").await.unwrap(), b"x");
        drop(proxy);
        let mut buf = [0u8; 1];
        let read = timeout(Duration::from_secs(5), a.read(&mut buf))
            .await
            .unwrap();
        assert!(read.is_err(), "expected a reset, got {read:?}");
        // Nobody listens any more.
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(TcpStream::connect(addr).await.is_err());
    }
}
