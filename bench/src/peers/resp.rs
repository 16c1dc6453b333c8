//! One RESP2 connection to Redis: send a command, read its reply (frames encoded and decoded by
//! `redis-protocol`). One command in flight at a time, as a pooled client connection of the
//! "idempotency keys in Redis" design uses it.

use bytes::{Bytes, BytesMut};
use redis_protocol::resp2::decode::decode_bytes_mut;
use redis_protocol::resp2::encode::extend_encode;
use redis_protocol::resp2::types::BytesFrame;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A reply that is not an answer.
#[derive(Debug)]
pub enum RespError {
    /// The connection failed or the reply was not RESP2.
    Io(String),
    /// Redis answered with an error reply (`-CODE message`).
    Server(String),
}

/// A connected client.
pub struct Resp {
    stream: TcpStream,
    read: BytesMut,
    write: BytesMut,
}

impl Resp {
    /// Connects to `HOST:PORT` (Nagle off: every command is one small write).
    pub async fn connect(addr: &str) -> std::io::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            read: BytesMut::with_capacity(4096),
            write: BytesMut::with_capacity(512),
        })
    }

    /// Sends the command `args` (bulk strings) and returns its reply.
    pub async fn call(&mut self, args: &[&[u8]]) -> Result<BytesFrame, RespError> {
        let command = BytesFrame::Array(
            args.iter()
                .map(|a| BytesFrame::BulkString(Bytes::copy_from_slice(a)))
                .collect(),
        );
        self.write.clear();
        extend_encode(&mut self.write, &command, false)
            .map_err(|e| RespError::Io(e.to_string()))?;
        self.stream
            .write_all(&self.write)
            .await
            .map_err(|e| RespError::Io(e.to_string()))?;
        loop {
            match decode_bytes_mut(&mut self.read) {
                Ok(Some((BytesFrame::Error(message), _, _))) => {
                    return Err(RespError::Server(message.to_string()))
                }
                Ok(Some((frame, _, _))) => return Ok(frame),
                Ok(None) => {}
                Err(e) => return Err(RespError::Io(format!("bad reply: {e}"))),
            }
            let n = self
                .stream
                .read_buf(&mut self.read)
                .await
                .map_err(|e| RespError::Io(e.to_string()))?;
            if n == 0 {
                return Err(RespError::Io("Redis closed the connection".into()));
            }
        }
    }
}

/// A reply's bulk or simple string, as text (`None` for other frames).
pub fn text(frame: &BytesFrame) -> Option<&str> {
    match frame {
        BytesFrame::BulkString(b) | BytesFrame::SimpleString(b) => std::str::from_utf8(b).ok(),
        _ => None,
    }
}
