//! Machines that answer the harness's commands in memory, for the tests of its own rules
//! (schedule, heal, exposure, refusals, abort paths) under tokio's paused time. Each node has a
//! database server (set up or not; running, paused or gone) and a run lock; every command is
//! kept with the time it came; a test can make commands fail. Commands the fake
//! does not recognise succeed and print nothing (iptables rules, clock files, agents).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use super::{Node, Output};

/// Where the fake database keeps each node's server (`/fake/<node>/server.cfg`, …).
pub const CONFIG_DIR: &str = "/fake/";

/// Answers commands in place of SSH (see [`super::Control::on_machines`]).
#[async_trait]
pub trait Machines: Send + Sync {
    /// Runs `command` as root on `node` with `stdin`.
    async fn answer(&self, node: &Node, command: &str, stdin: &[u8]) -> Output;
}

/// A node's database server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Server {
    /// No process.
    #[default]
    Gone,
    /// Running.
    Running,
    /// Stopped by SIGSTOP.
    Paused,
}

/// One machine's state.
#[derive(Debug, Default)]
struct Machine {
    set_up: bool,
    server: Server,
    /// The run lock's record, while one is held.
    lock: Option<String>,
}

/// A command as a machine received it.
#[derive(Debug, Clone)]
pub struct Sent {
    /// Since the machines were made (virtual under paused time).
    pub at: Duration,
    /// The node's name.
    pub node: String,
    /// The command.
    pub command: String,
}

/// A rule a test sets: commands containing `text` fail with `stderr`.
struct Rule {
    text: String,
    stderr: String,
}

/// A test's hook: the first command containing `text` calls `action`, then takes `hold` to
/// answer.
struct Hook {
    text: String,
    action: Box<dyn Fn() + Send + Sync>,
    hold: Duration,
}

/// In-memory machines, one per node name, made on first use.
pub struct FakeMachines {
    machines: Mutex<HashMap<String, Machine>>,
    sent: Mutex<Vec<Sent>>,
    rules: Mutex<Vec<Rule>>,
    hooks: Mutex<Vec<Hook>>,
    made: tokio::time::Instant,
}

impl FakeMachines {
    /// Machines with nothing set up and no lock held.
    pub fn new() -> Arc<FakeMachines> {
        Arc::new(FakeMachines {
            machines: Mutex::default(),
            sent: Mutex::default(),
            rules: Mutex::default(),
            hooks: Mutex::default(),
            made: tokio::time::Instant::now(),
        })
    }

    /// Makes every command containing `text` exit 1 with `stderr`.
    pub fn fail(&self, text: &str, stderr: &str) {
        self.rules.lock().unwrap().push(Rule {
            text: text.into(),
            stderr: stderr.into(),
        });
    }

    /// Calls `action` when the first command containing `text` comes (a signal raised as
    /// the run sends it, say), and lets that command take `hold` before it answers.
    pub fn when(&self, text: &str, hold: Duration, action: impl Fn() + Send + Sync + 'static) {
        self.hooks.lock().unwrap().push(Hook {
            text: text.into(),
            action: Box::new(action),
            hold,
        });
    }

    /// Every command received so far, in order.
    pub fn sent(&self) -> Vec<Sent> {
        self.sent.lock().unwrap().clone()
    }

    /// The server on `node`.
    pub fn server(&self, node: &str) -> Server {
        self.with(node, |m| m.server)
    }

    /// Whether `node` is set up.
    pub fn is_set_up(&self, node: &str) -> bool {
        self.with(node, |m| m.set_up)
    }

    /// Whether `node`'s run lock is held.
    pub fn is_locked(&self, node: &str) -> bool {
        self.with(node, |m| m.lock.is_some())
    }

    /// Ends the server on `node` behind the harness's back (a crash).
    pub fn crash(&self, node: &str) {
        self.with(node, |m| m.server = Server::Gone);
    }

    fn with<T>(&self, node: &str, f: impl FnOnce(&mut Machine) -> T) -> T {
        let mut machines = self.machines.lock().unwrap();
        f(machines.entry(node.to_string()).or_default())
    }
}

#[async_trait]
impl Machines for FakeMachines {
    async fn answer(&self, node: &Node, command: &str, _stdin: &[u8]) -> Output {
        self.sent.lock().unwrap().push(Sent {
            at: self.made.elapsed(),
            node: node.name.clone(),
            command: command.into(),
        });
        let hook = {
            let mut hooks = self.hooks.lock().unwrap();
            let at = hooks.iter().position(|h| command.contains(&h.text));
            at.map(|i| hooks.remove(i))
        };
        if let Some(hook) = hook {
            (hook.action)();
            tokio::time::sleep(hook.hold).await;
        }
        let failure = {
            let rules = self.rules.lock().unwrap();
            let mut matching = rules.iter().filter(|r| command.contains(&r.text));
            matching.next().map(|r| r.stderr.clone())
        };
        let (status, stdout, stderr) = match failure {
            Some(stderr) => (1, String::new(), stderr),
            None => {
                let (status, stdout) = self.with(&node.name, |m| m.run(command));
                (status, stdout, String::new())
            }
        };
        Output {
            status,
            stdout: stdout.into_bytes(),
            stderr: stderr.into_bytes(),
            input_sent: None,
            answered: None,
        }
    }
}

impl Machine {
    /// Runs one command: its exit status and standard output.
    fn run(&mut self, command: &str) -> (i32, String) {
        let said = |yes: bool, word: &str| (0, if yes { word.to_string() } else { String::new() });
        if let Some(verb) = command.strip_prefix("fake-db ") {
            let set_up = verb == "setup";
            self.set_up = set_up;
            self.server = if set_up {
                Server::Running
            } else {
                Server::Gone
            };
            return (0, String::new());
        }
        if command.contains("ln $t $f") {
            return self.take_lock(command);
        }
        if let Some(rest) = command.strip_prefix("grep -qF ") {
            let (token, _) = unquote_first(rest);
            if self.lock.as_ref().is_some_and(|l| l.contains(&token)) {
                self.lock = None;
            }
            return (0, String::new());
        }
        if let Some(signal) = signalled(command) {
            return said(self.signal(signal), "signalled");
        }
        if command.contains("/cmdline") && command.ends_with("then echo yes; fi") {
            return said(self.server != Server::Gone, "yes");
        }
        if command.contains("for i in $(seq 100)") {
            return (i32::from(self.server != Server::Gone), String::new());
        }
        if command.contains("setsid nohup") {
            if self.set_up && self.server == Server::Gone {
                self.server = Server::Running;
            }
            return (0, String::new());
        }
        if let Some(probe) = command.strip_prefix("test -f ") {
            // The fake database's configuration file says whether it is set up; other files
            // (a membership change's marker) are never there.
            let config = probe.starts_with(CONFIG_DIR) && probe.contains("/server.cfg ");
            return said(config && self.set_up, "yes");
        }
        (0, String::new())
    }

    /// The run lock's take command: `taken`, or `held`, an age and the holder's record.
    fn take_lock(&mut self, command: &str) -> (i32, String) {
        let Some((_, rest)) = command.split_once("printf '%s\\n' ") else {
            return (1, String::new());
        };
        let (record, _) = unquote_first(rest);
        match &self.lock {
            Some(held) => (0, format!("held\n0\n{held}")),
            None => {
                self.lock = Some(record);
                (0, "taken".into())
            }
        }
    }

    /// Sends `signal` to the server; whether one ran to receive it.
    fn signal(&mut self, signal: &str) -> bool {
        if self.server == Server::Gone {
            return false;
        }
        self.server = match signal {
            "KILL" | "TERM" => Server::Gone,
            "STOP" => Server::Paused,
            _ => Server::Running,
        };
        true
    }
}

/// The signal of a process's signal command (`… kill -STOP $pid && echo signalled …`).
fn signalled(command: &str) -> Option<&str> {
    let (_, rest) = command.split_once("then kill -")?;
    let (signal, _) = rest.split_once(" $pid && echo signalled")?;
    Some(signal)
}

/// The first shell word of `text` as [`super::shell::quote`] wrote it, and what follows it.
fn unquote_first(text: &str) -> (String, &str) {
    let Some(mut rest) = text.strip_prefix('\'') else {
        let end = text.find(' ').unwrap_or(text.len());
        return (text[..end].to_string(), &text[end..]);
    };
    let mut word = String::new();
    loop {
        let Some(end) = rest.find('\'') else {
            word.push_str(rest);
            return (word, "");
        };
        word.push_str(&rest[..end]);
        rest = &rest[end + 1..];
        match rest.strip_prefix("\\''") {
            Some(more) => {
                word.push('\'');
                rest = more;
            }
            None => return (word, rest),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::shell::quote;

    #[test]
    fn quoted_words_come_back_as_written() {
        for word in ["plain", "{\"pid\": 1}", "it's", "a b 'c'"] {
            let text = format!("{} rest", quote(word));
            assert_eq!(unquote_first(&text), (word.to_string(), " rest"));
        }
    }
}
