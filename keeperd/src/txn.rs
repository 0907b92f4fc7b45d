//! Transactions: the resolved, deterministic form of every write. The request
//! processor produces them, the log stores them, the data tree applies them.

use crate::jute::{DecodeError, DecodeResult, Reader, Writer};
use crate::proto::Acl;

/// One logged state change, identified by its zxid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Txn {
    /// Position in the total order of writes.
    pub zxid: i64,
    /// Wall-clock time of the write, ms since the epoch (becomes ctime/mtime).
    pub time: i64,
    /// Session that issued it (or that expired).
    pub session: i64,
    /// What changes.
    pub body: TxnBody,
}

/// The change a transaction makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnBody {
    /// A session was opened.
    CreateSession { timeout: i32, password: Vec<u8> },
    /// The session closed or expired: its ephemerals go.
    CloseSession,
    /// A znode was created (path already carries any sequence suffix).
    Create {
        path: String,
        data: Vec<u8>,
        acl: Vec<Acl>,
        ephemeral_owner: i64,
    },
    /// A znode was deleted.
    Delete { path: String },
    /// A znode's data was replaced; `version` is the new data version.
    SetData {
        path: String,
        data: Vec<u8>,
        version: i32,
    },
    /// A znode's ACL was replaced; `version` is the new ACL version.
    SetAcl {
        path: String,
        acl: Vec<Acl>,
        version: i32,
    },
    /// Several changes applied atomically under one zxid.
    Multi(Vec<TxnBody>),
}

const CREATE_SESSION: i32 = 1;
const CLOSE_SESSION: i32 = 2;
const CREATE: i32 = 3;
const DELETE: i32 = 4;
const SET_DATA: i32 = 5;
const SET_ACL: i32 = 6;
const MULTI: i32 = 7;

impl Txn {
    /// Encodes the transaction.
    pub fn encode(&self, w: &mut Writer) {
        w.i64(self.zxid).i64(self.time).i64(self.session);
        encode_body(&self.body, w);
    }

    /// Decodes a transaction; every byte must be consumed.
    pub fn decode(bytes: &[u8]) -> DecodeResult<Txn> {
        let mut r = Reader::new(bytes);
        let txn = Txn {
            zxid: r.i64()?,
            time: r.i64()?,
            session: r.i64()?,
            body: decode_body(&mut r, true)?,
        };
        if r.remaining() != 0 {
            return Err(DecodeError("trailing bytes after transaction"));
        }
        Ok(txn)
    }
}

fn encode_body(body: &TxnBody, w: &mut Writer) {
    match body {
        TxnBody::CreateSession { timeout, password } => {
            w.i32(CREATE_SESSION).i32(*timeout).buffer(password);
        }
        TxnBody::CloseSession => {
            w.i32(CLOSE_SESSION);
        }
        TxnBody::Create {
            path,
            data,
            acl,
            ephemeral_owner,
        } => {
            w.i32(CREATE).string(path).buffer(data);
            Acl::write_list(acl, w);
            w.i64(*ephemeral_owner);
        }
        TxnBody::Delete { path } => {
            w.i32(DELETE).string(path);
        }
        TxnBody::SetData {
            path,
            data,
            version,
        } => {
            w.i32(SET_DATA).string(path).buffer(data).i32(*version);
        }
        TxnBody::SetAcl { path, acl, version } => {
            w.i32(SET_ACL).string(path);
            Acl::write_list(acl, w);
            w.i32(*version);
        }
        TxnBody::Multi(subs) => {
            w.i32(MULTI).i32(subs.len() as i32);
            for s in subs {
                encode_body(s, w);
            }
        }
    }
}

fn decode_body(r: &mut Reader, top: bool) -> DecodeResult<TxnBody> {
    Ok(match r.i32()? {
        CREATE_SESSION if top => TxnBody::CreateSession {
            timeout: r.i32()?,
            password: r.buffer()?,
        },
        CLOSE_SESSION if top => TxnBody::CloseSession,
        CREATE => TxnBody::Create {
            path: r.string()?,
            data: r.buffer()?,
            acl: r.vec(Acl::read)?,
            ephemeral_owner: r.i64()?,
        },
        DELETE => TxnBody::Delete { path: r.string()? },
        SET_DATA => TxnBody::SetData {
            path: r.string()?,
            data: r.buffer()?,
            version: r.i32()?,
        },
        SET_ACL => TxnBody::SetAcl {
            path: r.string()?,
            acl: r.vec(Acl::read)?,
            version: r.i32()?,
        },
        MULTI if top => TxnBody::Multi(r.vec(|r| decode_body(r, false))?),
        _ => return Err(DecodeError("unknown transaction type")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_kind() {
        let bodies = vec![
            TxnBody::CreateSession {
                timeout: 4000,
                password: vec![1; 16],
            },
            TxnBody::CloseSession,
            TxnBody::Multi(vec![
                TxnBody::Create {
                    path: "/a".into(),
                    data: b"x".to_vec(),
                    acl: vec![Acl::open()],
                    ephemeral_owner: 7,
                },
                TxnBody::SetData {
                    path: "/a".into(),
                    data: vec![],
                    version: 1,
                },
                TxnBody::SetAcl {
                    path: "/a".into(),
                    acl: vec![Acl::open()],
                    version: 1,
                },
                TxnBody::Delete { path: "/a".into() },
            ]),
        ];
        for (i, body) in bodies.into_iter().enumerate() {
            let txn = Txn {
                zxid: i as i64 + 1,
                time: 99,
                session: 5,
                body,
            };
            let mut w = Writer::new();
            txn.encode(&mut w);
            assert_eq!(Txn::decode(&w.buf).unwrap(), txn);
            assert!(Txn::decode(&w.buf[..w.buf.len() - 1]).is_err());
        }
    }
}
