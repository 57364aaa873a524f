//! Where clients connect: a TCP address or a Unix socket, and the stream
//! of one connection either way.

use std::io::{IoSlice, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Duration;

/// A listening socket.
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

/// One client's connection.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Listener {
    /// Accept without blocking: `Ok(None)` when no client is waiting.
    pub fn set_nonblocking(&self) -> std::io::Result<()> {
        match self {
            Listener::Tcp(l) => l.set_nonblocking(true),
            Listener::Unix(l) => l.set_nonblocking(true),
        }
    }

    /// The next client and a name for it (`None`: nobody is waiting).
    pub fn accept(&self) -> std::io::Result<Option<(Stream, String)>> {
        let accepted = match self {
            Listener::Tcp(l) => l.accept().map(|(s, a)| {
                let _ = s.set_nodelay(true);
                (Stream::Tcp(s), a.to_string())
            }),
            Listener::Unix(l) => l.accept().map(|(s, _)| (Stream::Unix(s), "unix socket".to_string())),
        };
        match accepted {
            Ok((s, name)) => {
                s.set_blocking()?;
                Ok(Some((s, name)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl Stream {
    pub fn try_clone(&self) -> std::io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
        })
    }

    fn set_blocking(&self) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nonblocking(false),
            Stream::Unix(s) => s.set_nonblocking(false),
        }
    }

    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(timeout),
            Stream::Unix(s) => s.set_read_timeout(timeout),
        }
    }

    /// Close both directions (ends the connection's threads).
    pub fn shutdown(&self) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    /// One `writev` (replies are sent from the byte store this way).
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write_vectored(bufs),
            Stream::Unix(s) => s.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Unix(s) => s.flush(),
        }
    }
}
