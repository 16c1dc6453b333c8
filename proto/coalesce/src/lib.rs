//! Write coalescing for an HTTP/2 connection's socket, used by both ends (the server's accepted
//! connections, the Rust client's channels): the first write after a flush is held back for one
//! turn of the scheduler, so that frames finished at the same moment leave in one `writev`.
//!
//! The HTTP/2 connection task writes and flushes as soon as one stream hands it a frame. When a
//! batch of answers is ready at once — a group commit answering a dozen Claims, a read of a dozen
//! requests answered from the cache — or many callers send requests on one channel, each stream
//! task wakes the connection task, and the runtime runs a task woken by the running one right
//! after it: every frame went out in a `writev` of its own (one per RPC under load, measured on
//! both ends), each a trip through the loopback or network stack on both ends. Here the first
//! write attempt after a flush wakes the task and returns `Pending` instead; the task is polled
//! again after the tasks already queued, which add their frames to HTTP/2's send buffer
//! meanwhile, and the next attempt writes everything buffered by then. A lone frame costs one
//! extra poll of the connection task, not a timer: nothing waits on a clock.
//!
//! Reads, flushes and shutdowns pass straight through.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// An I/O stream whose first write after each flush yields once (see the module doc).
#[derive(Debug)]
pub struct Coalesce<IO> {
    io: IO,
    /// Whether this flush's writes already yielded once: they go through until the next flush.
    yielded: bool,
}

impl<IO> Coalesce<IO> {
    /// `io` with its writes coalesced.
    pub fn new(io: IO) -> Self {
        Self { io, yielded: false }
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    /// Returns `Pending` (already woken) on the first write attempt since the last flush.
    fn hold_back(&mut self, cx: &mut Context<'_>) -> bool {
        if self.yielded {
            return false;
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        true
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Coalesce<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Coalesce<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if buf.is_empty() || !this.hold_back(cx) {
            return Pin::new(&mut this.io).poll_write(cx, buf);
        }
        Poll::Pending
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if bufs.iter().all(|b| b.is_empty()) || !this.hold_back(cx) {
            return Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        }
        Poll::Pending
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let flushed = Pin::new(&mut this.io).poll_flush(cx);
        if flushed.is_ready() {
            this.yielded = false;
        }
        flushed
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;
    use tokio::io::AsyncWriteExt;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn the_first_write_after_a_flush_yields_once_and_wakes_the_task() {
        let wakes = Arc::new(Count(AtomicUsize::new(0)));
        let waker = std::task::Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        let mut io = Coalesce::new(Vec::<u8>::new());
        let mut pinned = Pin::new(&mut io);
        assert!(pinned.as_mut().poll_write(&mut cx, b"ab").is_pending());
        assert_eq!(wakes.0.load(Ordering::Relaxed), 1, "woken to try again");
        // Tried again: the write goes through, and so does every write until the flush.
        assert!(matches!(
            pinned.as_mut().poll_write(&mut cx, b"ab"),
            Poll::Ready(Ok(2))
        ));
        assert!(matches!(
            pinned.as_mut().poll_write(&mut cx, b"cd"),
            Poll::Ready(Ok(2))
        ));
        assert!(pinned.as_mut().poll_flush(&mut cx).is_ready());
        // After the flush, the next write yields again.
        let slices = [io::IoSlice::new(b"e")];
        assert!(pinned
            .as_mut()
            .poll_write_vectored(&mut cx, &slices)
            .is_pending());
        assert_eq!(wakes.0.load(Ordering::Relaxed), 2);
        assert!(matches!(
            pinned.as_mut().poll_write_vectored(&mut cx, &slices),
            Poll::Ready(Ok(1))
        ));
        assert_eq!(io.get_ref().as_slice(), b"abcde");
    }

    #[tokio::test]
    async fn writers_see_every_byte_in_order() {
        let (client, mut server) = tokio::io::duplex(1 << 16);
        let mut client = Coalesce::new(client);
        for chunk in [&b"hello "[..], b"coalesced ", b"world"] {
            client.write_all(chunk).await.unwrap();
            client.flush().await.unwrap();
        }
        client.shutdown().await.unwrap();
        let mut got = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut server, &mut got)
            .await
            .unwrap();
        assert_eq!(got, b"hello coalesced world");
    }
}
