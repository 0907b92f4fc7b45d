//! Hostile input: a property test over the frame and record decoders, and
//! malformed, truncated, oversized or stalled frames sent to a running
//! keeperd, which must close that connection and keep serving everyone else.

mod common;

use common::Server;
use keeperd::frame::{FrameDecoder, MAX_FRAME};
use keeperd::jute::Writer;
use keeperd::proto::{op, ConnectRequest, Request};
use rand::{Rng, SeedableRng};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const OPCODES: &[i32] = &[
    op::PING,
    op::CLOSE_SESSION,
    op::CREATE,
    op::CREATE2,
    op::CREATE_CONTAINER,
    op::CREATE_TTL,
    op::DELETE,
    op::EXISTS,
    op::GET_DATA,
    op::SET_DATA,
    op::GET_ACL,
    op::SET_ACL,
    op::GET_CHILDREN,
    op::GET_CHILDREN2,
    op::SYNC,
    op::CHECK,
    op::MULTI,
    op::MULTI_READ,
    op::GET_ALL_CHILDREN_NUMBER,
    op::GET_EPHEMERALS,
    op::AUTH,
    op::SET_WATCHES,
    op::SET_WATCHES2,
    op::ADD_WATCH,
    op::REMOVE_WATCHES,
    op::CHECK_WATCHES,
    op::WHO_AM_I,
    op::RECONFIG,
    9999,
];

/// Valid request bodies to mutate.
fn seeds() -> Vec<(i32, Vec<u8>)> {
    let mut create = Writer::new();
    create
        .string("/a/b")
        .buffer(b"data")
        .i32(1)
        .i32(31)
        .string("world")
        .string("anyone")
        .i32(2);
    let mut multi = Writer::new();
    multi
        .i32(op::CREATE)
        .bool(false)
        .i32(-1)
        .string("/m")
        .buffer(b"")
        .i32(1)
        .i32(31)
        .string("world")
        .string("anyone")
        .i32(0);
    multi.i32(op::CHECK).bool(false).i32(-1).string("/m").i32(0);
    multi.i32(-1).bool(true).i32(-1);
    let mut watches = Writer::new();
    watches
        .i64(5)
        .strings(&["/a"])
        .strings(&["/b", "/c"])
        .strings::<&str>(&[])
        .strings(&["/p"])
        .strings(&["/r"]);
    let mut get = Writer::new();
    get.string("/a").bool(true);
    vec![
        (op::CREATE, create.buf),
        (op::MULTI, multi.buf),
        (op::SET_WATCHES2, watches.buf),
        (op::GET_DATA, get.buf),
    ]
}

fn mutate(rng: &mut rand::rngs::StdRng, mut v: Vec<u8>) -> Vec<u8> {
    for _ in 0..rng.gen_range(1..4) {
        match rng.gen_range(0..4) {
            0 if !v.is_empty() => {
                let i = rng.gen_range(0..v.len());
                v[i] = rng.gen();
            }
            1 if !v.is_empty() => v.truncate(rng.gen_range(0..v.len())),
            2 => {
                let i = rng.gen_range(0..=v.len());
                v.insert(i, rng.gen());
            }
            _ if v.len() >= 4 => {
                // Overwrite a length field with an extreme value.
                let i = rng.gen_range(0..=v.len() - 4);
                let extreme = [-1i32, 0, 1, i32::MAX, i32::MIN, 0x7fff][rng.gen_range(0..6)];
                v[i..i + 4].copy_from_slice(&extreme.to_be_bytes());
            }
            _ => v.push(rng.gen()),
        }
    }
    v
}

/// Property: for any bytes, the decoders return a value or an error, never panic,
/// never read past their input, and a frame split arbitrarily decodes the same.
#[test]
fn decoders_never_panic_on_arbitrary_or_mutated_input() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    let seeds = seeds();
    for (opcode, body) in &seeds {
        assert!(
            Request::decode(*opcode, body).is_ok(),
            "seed for op {opcode} must decode"
        );
    }
    for case in 0..20_000 {
        let bytes: Vec<u8> = if case % 2 == 0 {
            let (_, body) = &seeds[rng.gen_range(0..seeds.len())];
            mutate(&mut rng, body.clone())
        } else {
            (0..rng.gen_range(0..64)).map(|_| rng.gen()).collect()
        };
        for &opcode in OPCODES {
            let _ = Request::decode(opcode, &bytes);
        }
        let _ = ConnectRequest::decode(&bytes);

        // Framing: the same stream fed whole or in random pieces yields the same outcome.
        let mut whole = FrameDecoder::new();
        whole.extend(&bytes);
        let mut expected = Vec::new();
        let whole_err = loop {
            match whole.next_frame() {
                Ok(Some(f)) => expected.push(f),
                Ok(None) => break false,
                Err(_) => break true,
            }
        };
        let mut pieces = FrameDecoder::new();
        let mut got = Vec::new();
        let mut piece_err = false;
        let mut rest = &bytes[..];
        while !rest.is_empty() && !piece_err {
            let n = rng.gen_range(1..=rest.len());
            pieces.extend(&rest[..n]);
            rest = &rest[n..];
            loop {
                match pieces.next_frame() {
                    Ok(Some(f)) => got.push(f),
                    Ok(None) => break,
                    Err(_) => {
                        piece_err = true;
                        break;
                    }
                }
            }
        }
        assert_eq!(got, expected, "case {case}");
        assert_eq!(piece_err, whole_err, "case {case}");
    }
}

fn connect_frame(session: i64, password: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    w.i32(0)
        .i32(0)
        .i64(0)
        .i32(5000)
        .i64(session)
        .buffer(password)
        .bool(false);
    let len = (w.buf.len() - 4) as i32;
    w.buf[..4].copy_from_slice(&len.to_be_bytes());
    w.buf
}

/// Whether the server closes `s` within a few seconds.
fn closed_by_server(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return true,
        }
    }
    false
}

fn server_still_serves(server: &Server) {
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    s.write_all(&connect_frame(0, &[0; 16])).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("a connect response");
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    let session = i64::from_be_bytes(body[8..16].try_into().unwrap());
    assert_ne!(session, 0, "new session granted");
    assert_eq!(server.four("ruok"), "imok");
}

#[test]
fn malformed_frames_close_only_that_connection() {
    let server = Server::start("hostile", "");
    let after_connect = |payload: &[u8]| {
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.write_all(&connect_frame(0, &[0; 16])).unwrap();
        s.write_all(payload).unwrap();
        s
    };
    let mut cases: Vec<(&str, TcpStream)> = Vec::new();
    // Negative and oversized lengths, before and after the handshake.
    let mut raw = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    raw.write_all(&(-5i32).to_be_bytes()).unwrap();
    cases.push(("negative length", raw));
    let mut raw = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    raw.write_all(&((MAX_FRAME + 1) as i32).to_be_bytes())
        .unwrap();
    cases.push(("oversized length", raw));
    cases.push(("oversized request", after_connect(&i32::MAX.to_be_bytes())));
    // A garbage handshake.
    let mut raw = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    raw.write_all(&[0, 0, 0, 3, 1, 2, 3]).unwrap();
    cases.push(("garbage handshake", raw));
    // A request whose body does not parse (create with a string length past the frame).
    let mut bad = Writer::new();
    bad.i32(12).i32(1).i32(op::CREATE).i32(1000);
    cases.push(("truncated record", after_connect(&bad.buf)));
    // A request header cut short.
    cases.push(("short header", after_connect(&[0, 0, 0, 2, 0, 1])));
    for (what, mut s) in cases {
        assert!(closed_by_server(&mut s), "{what}: connection not closed");
    }

    // A stalled half frame holds only its own connection.
    let mut stalled = after_connect(&[0, 0, 1, 0, 1, 2]);
    server_still_serves(&server);
    stalled.write_all(&[3]).unwrap();
    server_still_serves(&server);

    // Resuming a session with the wrong password is refused as expired (timeout 0, session 0).
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    s.write_all(&connect_frame(0, &[0; 16])).unwrap();
    let mut reply = [0u8; 4 + 4 + 4 + 8 + 4 + 16 + 1];
    s.read_exact(&mut reply).unwrap();
    let session = i64::from_be_bytes(reply[12..20].try_into().unwrap());
    let mut thief = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    thief.write_all(&connect_frame(session, &[9; 16])).unwrap();
    let mut refused = [0u8; 4 + 4 + 4 + 8];
    thief.read_exact(&mut refused).unwrap();
    assert_eq!(
        i32::from_be_bytes(refused[8..12].try_into().unwrap()),
        0,
        "timeout 0"
    );
    assert_eq!(
        i64::from_be_bytes(refused[12..20].try_into().unwrap()),
        0,
        "session 0"
    );
    assert!(closed_by_server(&mut thief));
    server_still_serves(&server);
}
