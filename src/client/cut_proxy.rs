//! A loopback TCP proxy in front of a ZooKeeper server: the clients that connect through it
//! can be cut off while the servers stay healthy (a client-side cut: their sessions expire
//! unless the cut ends in time), or its server's watch notifications dropped (deaf), the
//! missed watch a liveness check must catch.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The xid of a watch notification in a server's reply header.
const NOTIFICATION_XID: i32 = -1;

/// Forwards connections to `upstream` until cut; while cut, drops every connection; while
/// deaf, drops the server's watch notifications.
pub struct CutProxy {
    addr: SocketAddr,
    cut: watch::Sender<bool>,
    /// Switches deafness; only tests make a proxy deaf.
    #[cfg(test)]
    deaf: watch::Sender<bool>,
    accept: JoinHandle<()>,
}

impl CutProxy {
    /// A proxy on a free loopback port forwarding to `upstream`, for tests.
    #[cfg(test)]
    pub async fn start(upstream: SocketAddr) -> CutProxy {
        CutProxy::bind(upstream.to_string())
            .await
            .expect("a loopback proxy port")
    }

    /// A proxy on a free loopback port forwarding to `upstream` (`host:port`).
    pub async fn bind(upstream: String) -> std::io::Result<CutProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (cut, cut_rx) = watch::channel(false);
        let (deaf, deaf_rx) = watch::channel(false);
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if *cut_rx.borrow() {
                    continue;
                }
                let (mut cut_rx, deaf_rx) = (cut_rx.clone(), deaf_rx.clone());
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream.as_str()).await else {
                        return;
                    };
                    let (client_rd, client_wr) = client.into_split();
                    let (server_rd, server_wr) = server.into_split();
                    tokio::select! {
                        _ = forward(client_rd, server_wr) => {}
                        _ = forward_replies(server_rd, client_wr, deaf_rx) => {}
                        _ = cut_rx.wait_for(|c| *c) => {}
                    }
                });
            }
        });
        // Without tests nothing makes the proxy deaf: the replies read `false` for good.
        #[cfg(not(test))]
        drop(deaf);
        Ok(CutProxy {
            addr,
            cut,
            #[cfg(test)]
            deaf,
            accept,
        })
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Cuts (`true`) or restores (`false`) the link.
    pub fn set_cut(&self, cut: bool) {
        self.cut.send_replace(cut);
    }

    /// Drops (`true`) or forwards (`false`) the server's watch notifications.
    #[cfg(test)]
    pub fn set_deaf(&self, deaf: bool) {
        self.deaf.send_replace(deaf);
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Copies the client's requests to the server as they come.
async fn forward(mut from: OwnedReadHalf, mut to: OwnedWriteHalf) {
    let _ = tokio::io::copy(&mut from, &mut to).await;
}

/// Copies the server's frames to the client, leaving out watch notifications while `deaf`.
async fn forward_replies(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    deaf: watch::Receiver<bool>,
) -> std::io::Result<()> {
    loop {
        let mut len = [0u8; 4];
        from.read_exact(&mut len).await?;
        let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
        from.read_exact(&mut frame).await?;
        let xid = frame
            .get(..4)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        if xid == Some(NOTIFICATION_XID) && *deaf.borrow() {
            continue;
        }
        to.write_all(&len).await?;
        to.write_all(&frame).await?;
    }
}
