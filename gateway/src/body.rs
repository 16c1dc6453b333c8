//! Bodies read up to a limit, never into an unbounded buffer: a keyed request's body (413 past
//! `--max-request-bytes`) and an upstream response's body (stored when it fits under
//! `--max-response-bytes`; otherwise what was read so far is sent on, followed by the rest as it
//! streams in).

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Why a body could not be read in full.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// It is longer than the limit.
    #[error("the body is longer than {0} bytes")]
    TooLarge(usize),
    /// The connection failed while reading.
    #[error("the body could not be read: {0}")]
    Broken(String),
}

/// Reads a whole request body of at most `limit` bytes (a `Content-Length` over it is refused
/// before reading anything).
pub async fn read_request(
    body: Body,
    content_length: Option<u64>,
    limit: usize,
) -> Result<Bytes, ReadError> {
    if content_length.is_some_and(|n| n > limit as u64) {
        return Err(ReadError::TooLarge(limit));
    }
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(ReadError::TooLarge(limit)),
        Err(e) => Err(ReadError::Broken(e.to_string())),
    }
}

/// An upstream response body, read as far as `limit` allows.
pub enum Upstream<B> {
    /// The whole body fitted.
    Whole(Bytes),
    /// It did not: the bytes read so far (more than `limit`) and the rest, unread.
    Over(Bytes, B),
}

/// Reads `body` until it ends or has produced more than `limit` bytes. Trailers are dropped.
pub async fn read_upstream<B>(mut body: B, limit: usize) -> Result<Upstream<B>, ReadError>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut buf = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ReadError::Broken(e.to_string()))?;
        if let Ok(data) = frame.into_data() {
            buf.extend_from_slice(&data);
            if buf.len() > limit {
                return Ok(Upstream::Over(buf.freeze(), body));
            }
        }
    }
    Ok(Upstream::Whole(buf.freeze()))
}

/// A body made of bytes already read followed by the rest of the original body.
pub struct Prefixed<B> {
    prefix: Option<Bytes>,
    rest: B,
}

impl<B> Prefixed<B> {
    /// `prefix`, then `rest`.
    pub fn new(prefix: Bytes, rest: B) -> Self {
        Prefixed {
            prefix: Some(prefix).filter(|p| !p.is_empty()),
            rest,
        }
    }
}

impl<B> HttpBody for Prefixed<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        if let Some(prefix) = self.prefix.take() {
            return Poll::Ready(Some(Ok(Frame::data(prefix))));
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.is_none() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let rest = self.rest.size_hint();
        let extra = self.prefix.as_ref().map_or(0, |p| p.len() as u64);
        // Upper bound first: SizeHint refuses a lower bound above its current upper one.
        let mut hint = SizeHint::new();
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper.saturating_add(extra));
        }
        hint.set_lower(rest.lower().saturating_add(extra));
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{Full, StreamBody};

    type Frames =
        tokio_stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, std::convert::Infallible>>>;

    /// A body of `chunks` with no known length.
    fn chunked(chunks: &[&'static [u8]]) -> StreamBody<Frames> {
        let frames: Vec<_> = chunks
            .iter()
            .map(|c| Ok(Frame::data(Bytes::from_static(c))))
            .collect();
        StreamBody::new(tokio_stream::iter(frames))
    }

    #[tokio::test]
    async fn request_bodies_stop_at_the_limit() {
        let ok = read_request(Body::from("12345"), None, 5).await.unwrap();
        assert_eq!(&ok[..], b"12345");
        assert!(matches!(
            read_request(Body::from("123456"), None, 5).await,
            Err(ReadError::TooLarge(5))
        ));
        // A declared length over the limit is refused before reading.
        assert!(matches!(
            read_request(Body::empty(), Some(6), 5).await,
            Err(ReadError::TooLarge(5))
        ));
    }

    #[tokio::test]
    async fn an_upstream_body_over_the_limit_is_passed_on_whole() {
        let body = chunked(&[b"abc", b"def", b"ghi"]);
        let Upstream::Over(prefix, rest) = read_upstream(body, 4).await.unwrap() else {
            panic!("9 bytes do not fit in 4");
        };
        assert_eq!(&prefix[..], b"abcdef");
        let all = Prefixed::new(prefix, rest)
            .collect()
            .await
            .unwrap()
            .to_bytes();
        assert_eq!(&all[..], b"abcdefghi");
        let Upstream::Whole(whole) = read_upstream(Full::new(Bytes::from_static(b"abcd")), 4)
            .await
            .unwrap()
        else {
            panic!("4 bytes fit in 4");
        };
        assert_eq!(&whole[..], b"abcd");
    }

    #[test]
    fn the_size_hint_counts_the_prefix() {
        let exact = Prefixed::new(
            Bytes::from_static(b"abc"),
            Full::new(Bytes::from_static(b"de")),
        );
        assert_eq!(exact.size_hint().exact(), Some(5));
        let open = Prefixed::new(Bytes::from_static(b"abc"), chunked(&[b"d"]));
        assert_eq!(
            (open.size_hint().lower(), open.size_hint().upper()),
            (3, None)
        );
    }
}
