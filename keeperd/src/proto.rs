//! ZooKeeper 3.8 wire records (zookeeper.jute): op codes, error codes, the
//! connect handshake, request bodies and the reply frames the server sends.

use crate::jute::{DecodeError, DecodeResult, Reader, Writer};

/// Operation codes (ZooDefs.OpCode).
pub mod op {
    #![allow(missing_docs)]
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const EXISTS: i32 = 3;
    pub const GET_DATA: i32 = 4;
    pub const SET_DATA: i32 = 5;
    pub const GET_ACL: i32 = 6;
    pub const SET_ACL: i32 = 7;
    pub const GET_CHILDREN: i32 = 8;
    pub const SYNC: i32 = 9;
    pub const PING: i32 = 11;
    pub const GET_CHILDREN2: i32 = 12;
    pub const CHECK: i32 = 13;
    pub const MULTI: i32 = 14;
    pub const CREATE2: i32 = 15;
    pub const RECONFIG: i32 = 16;
    pub const CHECK_WATCHES: i32 = 17;
    pub const REMOVE_WATCHES: i32 = 18;
    pub const CREATE_CONTAINER: i32 = 19;
    pub const CREATE_TTL: i32 = 21;
    pub const MULTI_READ: i32 = 22;
    pub const AUTH: i32 = 100;
    pub const SET_WATCHES: i32 = 101;
    pub const GET_EPHEMERALS: i32 = 103;
    pub const GET_ALL_CHILDREN_NUMBER: i32 = 104;
    pub const SET_WATCHES2: i32 = 105;
    pub const ADD_WATCH: i32 = 106;
    pub const WHO_AM_I: i32 = 107;
    pub const CLOSE_SESSION: i32 = -11;
    pub const ERROR: i32 = -1;
}

/// Error codes (KeeperException.Code).
pub mod err {
    #![allow(missing_docs)]
    pub const OK: i32 = 0;
    pub const RUNTIME_INCONSISTENCY: i32 = -2;
    pub const UNIMPLEMENTED: i32 = -6;
    pub const BAD_ARGUMENTS: i32 = -8;
    pub const NO_NODE: i32 = -101;
    pub const NO_AUTH: i32 = -102;
    pub const BAD_VERSION: i32 = -103;
    pub const NO_CHILDREN_FOR_EPHEMERALS: i32 = -108;
    pub const SESSION_EXPIRED: i32 = -112;
    pub const SESSION_MOVED: i32 = -118;
    pub const NODE_EXISTS: i32 = -110;
    pub const NOT_EMPTY: i32 = -111;
    pub const INVALID_ACL: i32 = -114;
    pub const AUTH_FAILED: i32 = -115;
    pub const NO_WATCHER: i32 = -121;
    pub const NEW_CONFIG_NO_QUORUM: i32 = -13;
    pub const RECONFIG_IN_PROGRESS: i32 = -14;
}

/// Special xids: replies echo the request's xid (ping -2, auth -4 and
/// setWatches -8 included); watch notifications carry -1.
pub mod xid {
    /// Xid of a watch notification.
    pub const NOTIFICATION: i32 = -1;
}

/// Watcher event types (Watcher.Event.EventType).
pub mod event {
    #![allow(missing_docs)]
    pub const NODE_CREATED: i32 = 1;
    pub const NODE_DELETED: i32 = 2;
    pub const NODE_DATA_CHANGED: i32 = 3;
    pub const NODE_CHILDREN_CHANGED: i32 = 4;
    /// KeeperState.SyncConnected.
    pub const STATE_SYNC_CONNECTED: i32 = 3;
}

/// Permission bits (ZooDefs.Perms).
pub mod perms {
    #![allow(missing_docs)]
    pub const READ: i32 = 1;
    pub const WRITE: i32 = 2;
    pub const CREATE: i32 = 4;
    pub const DELETE: i32 = 8;
    pub const ADMIN: i32 = 16;
    pub const ALL: i32 = 31;
}

/// A znode's metadata as clients see it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stat {
    /// Zxid of the create.
    pub czxid: i64,
    /// Zxid of the last data change.
    pub mzxid: i64,
    /// Creation time, ms since the epoch.
    pub ctime: i64,
    /// Last modification time, ms since the epoch.
    pub mtime: i64,
    /// Data version.
    pub version: i32,
    /// Children version.
    pub cversion: i32,
    /// ACL version.
    pub aversion: i32,
    /// Owning session of an ephemeral, or the container/TTL marker.
    pub ephemeral_owner: i64,
    /// Length of the data.
    pub data_length: i32,
    /// Number of children.
    pub num_children: i32,
    /// Zxid of the last change to the children.
    pub pzxid: i64,
}

impl Stat {
    /// Encodes the stat record.
    pub fn write(&self, w: &mut Writer) {
        w.i64(self.czxid)
            .i64(self.mzxid)
            .i64(self.ctime)
            .i64(self.mtime);
        w.i32(self.version).i32(self.cversion).i32(self.aversion);
        w.i64(self.ephemeral_owner)
            .i32(self.data_length)
            .i32(self.num_children)
            .i64(self.pzxid);
    }

    /// Decodes a stat record.
    pub fn read(r: &mut Reader) -> DecodeResult<Stat> {
        Ok(Stat {
            czxid: r.i64()?,
            mzxid: r.i64()?,
            ctime: r.i64()?,
            mtime: r.i64()?,
            version: r.i32()?,
            cversion: r.i32()?,
            aversion: r.i32()?,
            ephemeral_owner: r.i64()?,
            data_length: r.i32()?,
            num_children: r.i32()?,
            pzxid: r.i64()?,
        })
    }
}

/// One ACL entry: permissions granted to an identity (scheme, id).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Acl {
    /// Permission bits.
    pub perms: i32,
    /// Scheme, e.g. "world", "digest", "auth", "ip".
    pub scheme: String,
    /// Identity within the scheme.
    pub id: String,
}

impl Acl {
    /// world:anyone with every permission (OPEN_ACL_UNSAFE).
    pub fn open() -> Acl {
        Acl {
            perms: perms::ALL,
            scheme: "world".into(),
            id: "anyone".into(),
        }
    }

    /// Decodes one ACL entry.
    pub fn read(r: &mut Reader) -> DecodeResult<Acl> {
        Ok(Acl {
            perms: r.i32()?,
            scheme: r.string()?,
            id: r.string()?,
        })
    }

    /// Encodes a list of ACL entries.
    pub fn write_list(acl: &[Acl], w: &mut Writer) {
        w.i32(acl.len() as i32);
        for a in acl {
            w.i32(a.perms).string(&a.scheme).string(&a.id);
        }
    }
}

/// The first frame a client sends.
#[derive(Debug, Clone)]
pub struct ConnectRequest {
    /// Protocol version (0).
    pub protocol_version: i32,
    /// Highest zxid the client has seen.
    pub last_zxid_seen: i64,
    /// Requested session timeout, ms.
    pub timeout: i32,
    /// Session to resume, or 0 for a new one.
    pub session_id: i64,
    /// Password of the session to resume.
    pub password: Vec<u8>,
}

impl ConnectRequest {
    /// Decodes a connect request (the trailing readOnly flag is optional).
    pub fn decode(body: &[u8]) -> DecodeResult<ConnectRequest> {
        let mut r = Reader::new(body);
        let req = ConnectRequest {
            protocol_version: r.i32()?,
            last_zxid_seen: r.i64()?,
            timeout: r.i32()?,
            session_id: r.i64()?,
            password: r.buffer()?,
        };
        if r.remaining() > 1 {
            return Err(DecodeError("trailing bytes after connect request"));
        }
        Ok(req)
    }
}

/// The body of a create, create2, createContainer or createTTL request.
#[derive(Debug, Clone)]
pub struct CreateRequest {
    /// Which op code carried it.
    pub opcode: i32,
    /// Path (before any sequence suffix).
    pub path: String,
    /// Data.
    pub data: Vec<u8>,
    /// ACL.
    pub acl: Vec<Acl>,
    /// CreateMode flags.
    pub flags: i32,
    /// TTL in ms for TTL modes, else 0.
    pub ttl: i64,
}

/// A write inside a multi request.
#[derive(Debug, Clone)]
pub enum MultiOp {
    /// create / create2 / createContainer / createTTL.
    Create(CreateRequest),
    /// delete with expected version.
    Delete { path: String, version: i32 },
    /// setData with expected version.
    SetData {
        path: String,
        data: Vec<u8>,
        version: i32,
    },
    /// check version.
    Check { path: String, version: i32 },
}

/// A read inside a multiRead request.
#[derive(Debug, Clone)]
pub enum ReadOp {
    /// getData.
    GetData { path: String, watch: bool },
    /// getChildren.
    GetChildren { path: String, watch: bool },
}

/// Paths carried by setWatches / setWatches2, by kind.
#[derive(Debug, Clone, Default)]
pub struct SetWatches {
    /// Zxid the client last saw.
    pub relative_zxid: i64,
    /// One-shot data watches.
    pub data: Vec<String>,
    /// One-shot exist watches.
    pub exist: Vec<String>,
    /// One-shot child watches.
    pub child: Vec<String>,
    /// Persistent watches.
    pub persistent: Vec<String>,
    /// Persistent recursive watches.
    pub recursive: Vec<String>,
}

/// A decoded client request (everything after the connect handshake).
#[derive(Debug, Clone)]
pub enum Request {
    /// Keep-alive.
    Ping,
    /// End the session.
    CloseSession,
    /// Any create flavour.
    Create(CreateRequest),
    /// delete.
    Delete { path: String, version: i32 },
    /// exists.
    Exists { path: String, watch: bool },
    /// getData.
    GetData { path: String, watch: bool },
    /// setData.
    SetData {
        path: String,
        data: Vec<u8>,
        version: i32,
    },
    /// getACL.
    GetAcl { path: String },
    /// setACL.
    SetAcl {
        path: String,
        acl: Vec<Acl>,
        version: i32,
    },
    /// getChildren (`with_stat` for getChildren2).
    GetChildren {
        path: String,
        watch: bool,
        with_stat: bool,
    },
    /// sync.
    Sync { path: String },
    /// check (outside multi: answered like the multi check).
    Check { path: String, version: i32 },
    /// multi (writes, all or nothing).
    Multi(Vec<MultiOp>),
    /// multiRead.
    MultiRead(Vec<ReadOp>),
    /// getAllChildrenNumber.
    GetAllChildrenNumber { path: String },
    /// getEphemerals.
    GetEphemerals { prefix: String },
    /// addauth.
    Auth { scheme: String, auth: Vec<u8> },
    /// setWatches / setWatches2.
    SetWatches(SetWatches),
    /// addWatch.
    AddWatch { path: String, mode: i32 },
    /// removeWatches (`remove` false for checkWatches).
    RemoveWatches {
        path: String,
        kind: i32,
        remove: bool,
    },
    /// whoAmI.
    WhoAmI,
    /// reconfig (ZooKeeper's ReconfigRequest): incremental (`joining`, `leaving`) or
    /// whole (`new_members`), valid while the membership's version is `config_id` (-1: any).
    Reconfig {
        joining: String,
        leaving: String,
        new_members: String,
        config_id: i64,
    },
    /// An op code keeperd does not implement.
    Unknown(i32),
}

impl Request {
    /// Decodes the body of a request with op code `opcode`. Every byte must be consumed.
    pub fn decode(opcode: i32, body: &[u8]) -> DecodeResult<Request> {
        let mut r = Reader::new(body);
        let req = Self::decode_from(opcode, &mut r)?;
        if r.remaining() != 0 {
            return Err(DecodeError("trailing bytes after request"));
        }
        Ok(req)
    }

    fn decode_from(opcode: i32, r: &mut Reader) -> DecodeResult<Request> {
        Ok(match opcode {
            op::PING => Request::Ping,
            op::CLOSE_SESSION => Request::CloseSession,
            op::CREATE | op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => {
                Request::Create(read_create(opcode, r)?)
            }
            op::DELETE => Request::Delete {
                path: r.string()?,
                version: r.i32()?,
            },
            op::EXISTS => Request::Exists {
                path: r.string()?,
                watch: r.bool()?,
            },
            op::GET_DATA => Request::GetData {
                path: r.string()?,
                watch: r.bool()?,
            },
            op::SET_DATA => Request::SetData {
                path: r.string()?,
                data: r.buffer()?,
                version: r.i32()?,
            },
            op::GET_ACL => Request::GetAcl { path: r.string()? },
            op::SET_ACL => Request::SetAcl {
                path: r.string()?,
                acl: r.vec(Acl::read)?,
                version: r.i32()?,
            },
            op::GET_CHILDREN | op::GET_CHILDREN2 => Request::GetChildren {
                path: r.string()?,
                watch: r.bool()?,
                with_stat: opcode == op::GET_CHILDREN2,
            },
            op::SYNC => Request::Sync { path: r.string()? },
            op::CHECK => Request::Check {
                path: r.string()?,
                version: r.i32()?,
            },
            op::MULTI => Request::Multi(read_multi(r, read_multi_op)?),
            op::MULTI_READ => Request::MultiRead(read_multi(r, read_read_op)?),
            op::GET_ALL_CHILDREN_NUMBER => Request::GetAllChildrenNumber { path: r.string()? },
            op::GET_EPHEMERALS => Request::GetEphemerals {
                prefix: r.string()?,
            },
            op::AUTH => {
                let _type = r.i32()?;
                Request::Auth {
                    scheme: r.string()?,
                    auth: r.buffer()?,
                }
            }
            op::SET_WATCHES | op::SET_WATCHES2 => {
                let mut sw = SetWatches {
                    relative_zxid: r.i64()?,
                    data: r.vec(|r| r.string())?,
                    exist: r.vec(|r| r.string())?,
                    child: r.vec(|r| r.string())?,
                    ..SetWatches::default()
                };
                if opcode == op::SET_WATCHES2 {
                    sw.persistent = r.vec(|r| r.string())?;
                    sw.recursive = r.vec(|r| r.string())?;
                }
                Request::SetWatches(sw)
            }
            op::ADD_WATCH => Request::AddWatch {
                path: r.string()?,
                mode: r.i32()?,
            },
            op::REMOVE_WATCHES | op::CHECK_WATCHES => Request::RemoveWatches {
                path: r.string()?,
                kind: r.i32()?,
                remove: opcode == op::REMOVE_WATCHES,
            },
            op::WHO_AM_I => Request::WhoAmI,
            op::RECONFIG => Request::Reconfig {
                joining: r.string()?,
                leaving: r.string()?,
                new_members: r.string()?,
                config_id: r.i64()?,
            },
            other => {
                // Skip the body of ops we do not serve; the reply says Unimplemented.
                r.skip_rest();
                Request::Unknown(other)
            }
        })
    }
}

fn read_create(opcode: i32, r: &mut Reader) -> DecodeResult<CreateRequest> {
    let path = r.string()?;
    let data = r.buffer()?;
    let acl = r.vec(Acl::read)?;
    let flags = r.i32()?;
    let ttl = if opcode == op::CREATE_TTL {
        r.i64()?
    } else {
        0
    };
    Ok(CreateRequest {
        opcode,
        path,
        data,
        acl,
        flags,
        ttl,
    })
}

/// Reads `MultiHeader`-delimited ops until the `done` header.
fn read_multi<T>(
    r: &mut Reader,
    mut item: impl FnMut(i32, &mut Reader) -> DecodeResult<T>,
) -> DecodeResult<Vec<T>> {
    let mut ops = Vec::new();
    loop {
        let opcode = r.i32()?;
        let done = r.bool()?;
        let _err = r.i32()?;
        if done {
            return Ok(ops);
        }
        ops.push(item(opcode, r)?);
    }
}

fn read_multi_op(opcode: i32, r: &mut Reader) -> DecodeResult<MultiOp> {
    Ok(match opcode {
        op::CREATE | op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => {
            MultiOp::Create(read_create(opcode, r)?)
        }
        op::DELETE => MultiOp::Delete {
            path: r.string()?,
            version: r.i32()?,
        },
        op::SET_DATA => MultiOp::SetData {
            path: r.string()?,
            data: r.buffer()?,
            version: r.i32()?,
        },
        op::CHECK => MultiOp::Check {
            path: r.string()?,
            version: r.i32()?,
        },
        _ => return Err(DecodeError("unsupported op in multi")),
    })
}

fn read_read_op(opcode: i32, r: &mut Reader) -> DecodeResult<ReadOp> {
    Ok(match opcode {
        op::GET_DATA => ReadOp::GetData {
            path: r.string()?,
            watch: r.bool()?,
        },
        op::GET_CHILDREN => ReadOp::GetChildren {
            path: r.string()?,
            watch: r.bool()?,
        },
        _ => return Err(DecodeError("unsupported op in multiRead")),
    })
}

/// Builds one length-prefixed reply frame: ReplyHeader(xid, zxid, err) then a body.
pub fn reply_frame(xid: i32, zxid: i64, err: i32, body: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::new();
    w.i32(0).i32(xid).i64(zxid).i32(err);
    body(&mut w);
    let len = (w.buf.len() - 4) as i32;
    w.buf[..4].copy_from_slice(&len.to_be_bytes());
    w.buf
}

/// Builds a reply frame whose body may fail: on `Err(code)` the body is
/// dropped and the header carries the code. Returns the frame and the code.
pub fn reply_frame_with(
    xid: i32,
    zxid: i64,
    body: impl FnOnce(&mut Writer) -> Result<(), i32>,
) -> (Vec<u8>, i32) {
    const HEADER: usize = 4 + 4 + 8 + 4;
    let mut code = err::OK;
    let mut frame = reply_frame(xid, zxid, err::OK, |w| {
        if let Err(e) = body(w) {
            w.buf.truncate(HEADER);
            code = e;
        }
    });
    frame[HEADER - 4..HEADER].copy_from_slice(&code.to_be_bytes());
    (frame, code)
}

/// Builds a watch notification frame (xid -1).
pub fn event_frame(zxid: i64, event_type: i32, path: &str) -> Vec<u8> {
    reply_frame(xid::NOTIFICATION, zxid, err::OK, |w| {
        w.i32(event_type)
            .i32(event::STATE_SYNC_CONNECTED)
            .string(path);
    })
}

/// Builds the connect response frame.
pub fn connect_frame(timeout: i32, session_id: i64, password: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    w.i32(0)
        .i32(0)
        .i32(timeout)
        .i64(session_id)
        .buffer(password)
        .bool(false);
    let len = (w.buf.len() - 4) as i32;
    w.buf[..4].copy_from_slice(&len.to_be_bytes());
    w.buf
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create_body() -> Vec<u8> {
        let mut w = Writer::new();
        w.string("/a")
            .buffer(b"x")
            .i32(1)
            .i32(31)
            .string("world")
            .string("anyone")
            .i32(0);
        w.buf
    }

    #[test]
    fn decodes_create_and_rejects_trailing_bytes() {
        let body = create_body();
        match Request::decode(op::CREATE, &body).unwrap() {
            Request::Create(c) => {
                assert_eq!(c.path, "/a");
                assert_eq!(c.acl, vec![Acl::open()]);
            }
            other => panic!("unexpected {other:?}"),
        }
        let mut long = body.clone();
        long.push(0);
        assert!(Request::decode(op::CREATE, &long).is_err());
        assert!(Request::decode(op::CREATE, &body[..body.len() - 1]).is_err());
    }

    #[test]
    fn decodes_multi_until_done() {
        let mut w = Writer::new();
        w.i32(op::CHECK).bool(false).i32(-1).string("/a").i32(3);
        w.i32(op::DELETE).bool(false).i32(-1).string("/b").i32(-1);
        w.i32(-1).bool(true).i32(-1);
        match Request::decode(op::MULTI, &w.buf).unwrap() {
            Request::Multi(ops) => assert_eq!(ops.len(), 2),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn reply_frame_is_length_prefixed() {
        let f = reply_frame(7, 9, 0, |w| {
            w.i32(1);
        });
        assert_eq!(f.len(), 4 + 16 + 4);
        assert_eq!(i32::from_be_bytes([f[0], f[1], f[2], f[3]]), 20);
        let (ok, code) = reply_frame_with(7, 9, |w| {
            w.i32(1);
            Ok(())
        });
        assert_eq!((ok, code), (f, err::OK));
        let (failed, code) = reply_frame_with(7, 9, |w| {
            w.i32(1);
            Err(err::NO_NODE)
        });
        assert_eq!(code, err::NO_NODE);
        assert_eq!(failed, reply_frame(7, 9, err::NO_NODE, |_| {}));
    }
}
