//! An accepted HTTP/2 connection that holds its port's slot until it closes, and that fails its
//! reads once the handshake deadline passes before the client has sent the whole HTTP/2 client
//! preface: the 24-byte magic and the SETTINGS frame after it (RFC 9113 §3.4). A client that
//! connects and stalls, or sends half a preface, costs its socket for at most that long.
//!
//! Only lengths are looked at; whether the bytes are a valid preface is for HTTP/2 to decide.

use oncekey_coalesce::Coalesce;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep};

/// `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`
const MAGIC_LEN: usize = 24;
/// An HTTP/2 frame header: 24-bit length, type, flags, stream id.
const FRAME_HEADER_LEN: usize = 9;

/// How much of the preface has arrived, and until when the rest may take.
struct Watch {
    /// Bytes read so far.
    seen: usize,
    /// The first frame's header, as it arrives.
    header: [u8; FRAME_HEADER_LEN],
    deadline: Pin<Box<Sleep>>,
}

impl Watch {
    /// Counts `bytes` just read; true once the preface is complete.
    fn observe(&mut self, bytes: &[u8]) -> bool {
        let start = self.seen;
        self.seen += bytes.len();
        let header_start = MAGIC_LEN;
        let header_end = MAGIC_LEN + FRAME_HEADER_LEN;
        for (i, byte) in bytes.iter().enumerate() {
            let at = start + i;
            if at >= header_end {
                break;
            }
            if at >= header_start {
                self.header[at - header_start] = *byte;
            }
        }
        if self.seen < header_end {
            return false;
        }
        let payload = u32::from_be_bytes([0, self.header[0], self.header[1], self.header[2]]);
        self.seen >= header_end + payload as usize
    }
}

/// An accepted connection (see the module doc).
pub struct Conn<IO> {
    io: Coalesce<IO>,
    /// Until the preface is complete.
    watch: Option<Box<Watch>>,
    _slot: OwnedSemaphorePermit,
}

impl<IO> Conn<IO> {
    /// `io`, holding `slot`, which must send its preface before `deadline`.
    pub fn new(io: IO, slot: OwnedSemaphorePermit, deadline: Instant) -> Self {
        Self {
            io: Coalesce::new(io),
            watch: Some(Box::new(Watch {
                seen: 0,
                header: [0; FRAME_HEADER_LEN],
                deadline: Box::pin(tokio::time::sleep_until(deadline)),
            })),
            _slot: slot,
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Conn<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if let Some(watch) = &mut this.watch {
                    if watch.observe(&buf.filled()[before..]) {
                        this.watch = None;
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                let late = this
                    .watch
                    .as_mut()
                    .is_some_and(|watch| watch.deadline.as_mut().poll(cx).is_ready());
                if late {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the HTTP/2 preface did not arrive in time",
                    )));
                }
                Poll::Pending
            }
            ready => ready,
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Conn<IO> {
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

impl<IO: tonic::transport::server::Connected> tonic::transport::server::Connected for Conn<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.get_ref().connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const MAGIC: &[u8; MAGIC_LEN] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    fn watch() -> Watch {
        Watch {
            seen: 0,
            header: [0; FRAME_HEADER_LEN],
            deadline: Box::pin(tokio::time::sleep(Duration::from_secs(10))),
        }
    }

    /// A SETTINGS frame with `n` settings (6 bytes each).
    fn settings(n: usize) -> Vec<u8> {
        let len = (6 * n) as u32;
        let mut frame = len.to_be_bytes()[1..].to_vec();
        frame.extend([4, 0, 0, 0, 0, 0]);
        frame.extend(std::iter::repeat_n(0, 6 * n));
        frame
    }

    #[tokio::test]
    async fn the_preface_is_the_magic_and_the_whole_settings_frame_in_any_pieces() {
        let mut preface = MAGIC.to_vec();
        preface.extend(settings(3));
        for piece in [1, 5, 24, 30, preface.len()] {
            let mut w = watch();
            let chunks: Vec<_> = preface.chunks(piece).collect();
            for (i, chunk) in chunks.iter().enumerate() {
                let done = w.observe(chunk);
                assert_eq!(done, i == chunks.len() - 1, "pieces of {piece}, chunk {i}");
            }
        }
        // An empty SETTINGS frame completes it right after its header.
        let mut w = watch();
        assert!(!w.observe(MAGIC));
        assert!(w.observe(&settings(0)));
    }

    #[tokio::test]
    async fn reads_fail_at_the_deadline_only_while_the_preface_is_incomplete() {
        let slots = Arc::new(tokio::sync::Semaphore::new(2));
        let (client, server) = tokio::io::duplex(1024);
        let deadline = Instant::now() + Duration::from_millis(100);
        let mut conn = Conn::new(server, slots.clone().try_acquire_owned().unwrap(), deadline);
        let mut client = client;
        client.write_all(&MAGIC[..10]).await.unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(conn.read(&mut buf).await.unwrap(), 10);
        let err = conn.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(Instant::now() >= deadline);
        drop(conn);
        assert_eq!(slots.available_permits(), 2, "the slot is free again");

        let (mut client, server) = tokio::io::duplex(1024);
        let deadline = Instant::now() + Duration::from_millis(100);
        let mut conn = Conn::new(server, slots.clone().try_acquire_owned().unwrap(), deadline);
        let mut preface = MAGIC.to_vec();
        preface.extend(settings(1));
        client.write_all(&preface).await.unwrap();
        assert_eq!(conn.read(&mut buf).await.unwrap(), preface.len());
        // Past the deadline, a complete preface's connection still waits for data.
        let read = conn.read(&mut buf);
        tokio::pin!(read);
        tokio::time::sleep_until(deadline + Duration::from_millis(200)).await;
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(read.as_mut().poll(&mut cx).is_pending());
        client.write_all(b"x").await.unwrap();
        assert_eq!(read.await.unwrap(), 1);
    }
}
