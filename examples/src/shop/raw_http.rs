//! Just enough of an HTTP/1.1 client for the load driver: one request per
//! connection, `Connection: close`, read until the server hangs up. Twenty
//! lines over `TcpStream` instead of an HTTP client crate.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A response: status code and body (headers dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The status code, e.g. 201.
    pub status: u16,
    /// The body as text.
    pub body: String,
}

/// Sends `<method> <path>` with an empty body to `addr` and reads the whole
/// reply, giving up after `limit` (a stuck server must not hang a demo).
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    limit: Duration,
) -> io::Result<Reply> {
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await?;
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        parse(&raw)
    };
    tokio::time::timeout(limit, exchange).await.map_err(|_| {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no reply within {limit:?}"),
        )
    })?
}

/// `HTTP/1.1 201 Created\r\n...\r\n\r\n<body>` -> (201, body).
fn parse(raw: &[u8]) -> io::Result<Reply> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| {
            let first = head.lines().next().unwrap_or("");
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not an HTTP reply: {first:?}"),
            )
        })?;
    Ok(Reply {
        status,
        body: body.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_and_body() {
        let raw = b"HTTP/1.1 409 Conflict\r\nretry-after: 1\r\n\r\n{\"error\":\"busy\"}";
        let reply = parse(raw).unwrap();
        assert_eq!(reply.status, 409);
        assert_eq!(reply.body, "{\"error\":\"busy\"}");
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse(b"hello").is_err());
    }
}
