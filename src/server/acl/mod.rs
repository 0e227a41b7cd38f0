//! Access control lists, as Redis 7 has them: named users with passwords
//! and the commands, keys and channels each may use (`user.rs`), AUTH by
//! user name, and the ACL command (`command.rs`). The users are the
//! server's own keys in the engine (`00 00 stria:acl: name` -> the user as
//! ACL LIST prints it), written like any write at the connection's
//! durability, so they survive restarts and crashes with no ACL file to
//! keep; every shard reads them from here. A change bumps a generation
//! that connections compare to see it at their next command.

pub mod command;
pub mod user;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use super::ServerEngine;
use user::User;

/// Where the users are stored.
const USERS: &[u8] = b"\0\0stria:acl:";

/// The engine key of user `name`.
pub fn user_key(name: &str) -> Vec<u8> {
    let mut k = USERS.to_vec();
    k.extend_from_slice(name.as_bytes());
    k
}

/// The users, by name.
pub struct Acl {
    users: RwLock<BTreeMap<String, Arc<User>>>,
    generation: AtomicU64,
}

impl Acl {
    /// The users stored in `engine`; `default` as the device map makes it
    /// (with its password) unless one is stored.
    pub fn open(engine: &ServerEngine, password: Option<&str>) -> Result<Acl, String> {
        let mut end = USERS.to_vec();
        *end.last_mut().expect("a prefix") += 1;
        let stored = engine
            .scan(USERS, Some(&end), usize::MAX)
            .map_err(|e| format!("reading the ACL users: {e}"))?;
        let mut users = BTreeMap::new();
        users.insert(
            "default".to_string(),
            Arc::new(User::default_user(password)),
        );
        for (_, text) in stored {
            let text = String::from_utf8_lossy(&text).into_owned();
            let u = User::from_description(&text)
                .map_err(|e| format!("a stored ACL user does not read back ({e}): {text}"))?;
            users.insert(u.name.clone(), Arc::new(u));
        }
        Ok(Acl {
            users: RwLock::new(users),
            generation: AtomicU64::new(0),
        })
    }

    /// Bumped by every change.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Whether a new connection is authenticated at once: `default` is on
    /// and has no password.
    pub fn default_open(&self) -> bool {
        self.get("default").is_some_and(|u| u.enabled && u.nopass)
    }

    pub fn get(&self, name: &str) -> Option<Arc<User>> {
        self.users.read().expect("acl lock").get(name).cloned()
    }

    pub fn all(&self) -> Vec<Arc<User>> {
        self.users
            .read()
            .expect("acl lock")
            .values()
            .cloned()
            .collect()
    }

    pub fn put(&self, u: User) {
        self.users
            .write()
            .expect("acl lock")
            .insert(u.name.clone(), Arc::new(u));
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    pub fn remove(&self, name: &str) -> bool {
        let gone = self.users.write().expect("acl lock").remove(name).is_some();
        self.generation.fetch_add(1, Ordering::AcqRel);
        gone
    }
}
