//! What a client connection is doing, as far as its time limits care: requests in flight (from
//! the head's arrival until the response body is sent or dropped), whether it ever carried one,
//! whether it speaks HTTP/2, when it last fell idle, and when bytes of a new request head started
//! arriving on an idle HTTP/1.1 connection. From these, [`Activity::due`] says when the connection
//! is to be closed if nothing changes:
//!
//! - before its first request: `--header-read-timeout` after it was accepted (a client that
//!   connects and stalls, or sends half a request head or half an HTTP/2 preface);
//! - idle HTTP/1.1 with part of a new head read: `--header-read-timeout` after its first byte
//!   (even past the idle timeout: a request that started arriving is given its full time);
//! - otherwise idle: `--idle-timeout` after its last request ended;
//! - never while a request is in flight.
//!
//! The counters are fed by the connection's reads ([`Watched`]), the service (`begin`) and the
//! response body ([`Tracked`]); nothing here closes anything.

use http::Version;
use http_body::{Body as HttpBody, Frame, SizeHint};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// The time limits of a connection.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// `--header-read-timeout`.
    pub header_read: Duration,
    /// `--idle-timeout`.
    pub idle: Duration,
}

/// No instant recorded.
const NONE: u64 = u64::MAX;

/// Where a connection's time comes from.
#[derive(Debug, Clone, Copy)]
enum Clock {
    /// The runtime's clock.
    Real,
    /// Milliseconds since acceptance, set by a test.
    #[cfg(test)]
    Fake(&'static AtomicU64),
}

/// One connection's activity (see the module docs).
#[derive(Debug)]
pub struct Activity {
    accepted: Instant,
    clock: Clock,
    busy: AtomicUsize,
    served: AtomicBool,
    h2: AtomicBool,
    /// Milliseconds after `accepted`.
    idle_since: AtomicU64,
    /// Milliseconds after `accepted`, or [`NONE`].
    head_since: AtomicU64,
}

impl Activity {
    /// A connection accepted now.
    pub fn new() -> Arc<Self> {
        Self::with_clock(Clock::Real)
    }

    fn with_clock(clock: Clock) -> Arc<Self> {
        Arc::new(Activity {
            accepted: Instant::now(),
            clock,
            busy: AtomicUsize::new(0),
            served: AtomicBool::new(false),
            h2: AtomicBool::new(false),
            idle_since: AtomicU64::new(0),
            head_since: AtomicU64::new(NONE),
        })
    }

    fn now_ms(&self) -> u64 {
        match self.clock {
            Clock::Real => u64::try_from(self.accepted.elapsed().as_millis()).unwrap_or(NONE - 1),
            #[cfg(test)]
            Clock::Fake(ms) => ms.load(Ordering::SeqCst),
        }
    }

    fn at(&self, ms: u64) -> Instant {
        self.accepted + Duration::from_millis(ms)
    }

    /// A request (of protocol `version`) has arrived; it is in flight until the guard drops.
    pub fn begin(self: &Arc<Self>, version: Version) -> Busy {
        self.busy.fetch_add(1, Ordering::SeqCst);
        self.served.store(true, Ordering::SeqCst);
        if version == Version::HTTP_2 {
            self.h2.store(true, Ordering::SeqCst);
        }
        self.head_since.store(NONE, Ordering::SeqCst);
        Busy(self.clone())
    }

    fn end(&self) {
        if self.busy.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.idle_since.store(self.now_ms(), Ordering::SeqCst);
            self.head_since.store(NONE, Ordering::SeqCst);
        }
    }

    /// `n` bytes were read from the client.
    fn read(&self, n: usize) {
        if n > 0 && self.busy.load(Ordering::SeqCst) == 0 {
            let _ = self.head_since.compare_exchange(
                NONE,
                self.now_ms(),
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
        }
    }

    /// When the connection is to be closed if nothing changes; `None` while a request is in
    /// flight.
    pub fn due(&self, t: &Timeouts) -> Option<Instant> {
        if self.busy.load(Ordering::SeqCst) > 0 {
            return None;
        }
        if !self.served.load(Ordering::SeqCst) {
            return Some(self.accepted + t.header_read);
        }
        let idle = self.at(self.idle_since.load(Ordering::SeqCst)) + t.idle;
        match self.head_since.load(Ordering::SeqCst) {
            NONE => Some(idle),
            _ if self.h2.load(Ordering::SeqCst) => Some(idle),
            head => Some(self.at(head) + t.header_read),
        }
    }
}

/// A request in flight on a connection; it ends when this drops.
#[derive(Debug)]
pub struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// A connection's stream, reporting its reads to the connection's [`Activity`].
pub struct Watched<IO> {
    io: IO,
    activity: Arc<Activity>,
}

impl<IO> Watched<IO> {
    /// `io`, reporting to `activity`.
    pub fn new(io: IO, activity: Arc<Activity>) -> Self {
        Watched { io, activity }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Watched<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            this.activity.read(buf.filled().len() - before);
        }
        polled
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Watched<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// A response body that keeps its request in flight until it is sent or dropped.
pub struct Tracked<B> {
    inner: B,
    _busy: Busy,
}

impl<B> Tracked<B> {
    /// `inner`, keeping `busy` until done.
    pub fn new(inner: B, busy: Busy) -> Self {
        Tracked { inner, _busy: busy }
    }
}

impl<B: HttpBody + Unpin> HttpBody for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Timeouts = Timeouts {
        header_read: Duration::from_secs(10),
        idle: Duration::from_secs(60),
    };

    /// A connection on a clock the test moves, and the clock.
    fn connection() -> (Arc<Activity>, &'static AtomicU64) {
        let clock: &'static AtomicU64 = Box::leak(Box::new(AtomicU64::new(0)));
        (Activity::with_clock(Clock::Fake(clock)), clock)
    }

    fn secs(s: u64) -> u64 {
        s * 1000
    }

    #[test]
    fn a_new_connection_has_the_header_read_timeout_for_its_first_request() {
        let (a, clock) = connection();
        assert_eq!(a.due(&T), Some(a.at(secs(10))));
        // Bytes of a head (or of an HTTP/2 preface) change nothing until a request arrives.
        clock.store(secs(3), Ordering::SeqCst);
        a.read(7);
        assert_eq!(a.due(&T), Some(a.at(secs(10))));
    }

    #[test]
    fn nothing_is_due_while_a_request_is_in_flight_however_long() {
        let (a, clock) = connection();
        let busy = a.begin(Version::HTTP_11);
        let body = Tracked::new(http_body_util::Empty::<bytes::Bytes>::new(), busy);
        clock.store(secs(3600), Ordering::SeqCst);
        a.read(100);
        assert_eq!(a.due(&T), None);
        drop(body);
        assert_eq!(a.due(&T), Some(a.at(secs(3660))));
    }

    #[test]
    fn an_idle_http1_connection_gets_the_header_timeout_from_a_new_heads_first_byte() {
        let (a, clock) = connection();
        drop(a.begin(Version::HTTP_11));
        clock.store(secs(20), Ordering::SeqCst);
        a.read(1);
        clock.store(secs(25), Ordering::SeqCst);
        a.read(1);
        assert_eq!(a.due(&T), Some(a.at(secs(30))));
        // The request arrives and ends: idle again, no head pending.
        drop(a.begin(Version::HTTP_11));
        assert_eq!(a.due(&T), Some(a.at(secs(85))));
    }

    #[test]
    fn an_idle_http2_connection_gets_the_idle_timeout_whatever_frames_arrive() {
        let (a, clock) = connection();
        let two = (a.begin(Version::HTTP_2), a.begin(Version::HTTP_2));
        drop(two.0);
        assert_eq!(a.due(&T), None, "one stream still open");
        clock.store(secs(1), Ordering::SeqCst);
        drop(two.1);
        clock.store(secs(6), Ordering::SeqCst);
        a.read(17); // a PING
        assert_eq!(a.due(&T), Some(a.at(secs(61))));
    }

    #[test]
    fn a_head_that_started_arriving_gets_its_full_time_even_past_the_idle_timeout() {
        let short_idle = Timeouts {
            header_read: Duration::from_secs(10),
            idle: Duration::from_secs(4),
        };
        let (a, clock) = connection();
        drop(a.begin(Version::HTTP_11));
        clock.store(secs(3), Ordering::SeqCst);
        a.read(3);
        assert_eq!(a.due(&short_idle), Some(a.at(secs(13))));
    }
}
