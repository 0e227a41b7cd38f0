//! A minimal WAL writer for tests: lays batches onto simulated devices with
//! the real format (BatchBuilder, segment headers) and keeps the truth to
//! check recovery against: every record written and what was flushed.

use std::collections::BTreeMap;

use rand::Rng;
use stria::config::SimConfig;
use stria::device::sim::{SimDevice, SimQueue};
use stria::device::{wait, Device, Request};
use stria::wal::format::{BatchBuilder, Geometry, Record, RecordOp, SegmentHeader};
use stria::wal::recovery::{recover, Recovered, RecoveryError, RecoveryOptions, WalDevice};
use stria::wal::Lsn;

pub const BS: u32 = 4096;
pub const SEGMENT: u64 = 64 << 10;
pub const SEGMENTS: u64 = 16;
pub const MAX_BATCH: usize = 16 << 10;
pub const APPLIANCE: u128 = 0x5354_5249_4100_0000_0000_0000_0000_0001;

/// A blank zero-latency device with room for [`SEGMENTS`] segments.
pub fn sim(name: &str, seed: u64) -> SimDevice {
    let model = SimConfig {
        write_us: 0,
        read_us: 0,
        flush_us: 0,
        bandwidth: 0,
        sector_size: 512,
        volatile_cache: true,
        seed,
        ..SimConfig::default()
    };
    let blocks = (1 << 20) / u64::from(BS) + SEGMENTS * SEGMENT / u64::from(BS);
    SimDevice::new(name, BS, blocks, 32, model)
}

pub fn sims(n: usize, seed: u64) -> Vec<SimDevice> {
    (0..n)
        .map(|i| sim(&format!("wal{i}"), seed + i as u64))
        .collect()
}

pub fn options(replay_from: Option<Lsn>, truncate_corrupt: bool) -> RecoveryOptions {
    RecoveryOptions {
        replay_from,
        truncate_corrupt,
        segment_size: SEGMENT,
        max_batch: MAX_BATCH as u64,
        appliance_id: APPLIANCE,
        lose_unreadable: 0,
        stale: Vec::new(),
    }
}

pub fn run_recovery(
    devs: &[SimDevice],
    opts: &RecoveryOptions,
) -> Result<Recovered, RecoveryError> {
    let wal = WalDevice::stripe(devs);
    recover(&wal, opts)
}

/// Where a batch went.
#[derive(Clone, Copy, Debug)]
pub struct Placed {
    pub dev: usize,
    pub segment: u64,
    /// Byte offset on the device.
    pub offset: u64,
    pub first_lsn: Lsn,
    pub count: u32,
}

impl Placed {
    pub fn last_lsn(&self) -> Lsn {
        self.first_lsn + u64::from(self.count) - 1
    }
}

struct DevState {
    queue: SimQueue,
    next_seq: u64,
    next_segment: u64,
    /// Current segment: (index, seq, next free LBA).
    current: Option<(u64, u64, u64)>,
}

pub struct Writer {
    pub devs: Vec<SimDevice>,
    pub geo: Geometry,
    pub appliance: u128,
    pub epoch: u64,
    pub next_lsn: Lsn,
    /// Every LSN up to this is durable on its device.
    pub durable: Lsn,
    /// Every record written, by LSN.
    pub log: BTreeMap<Lsn, Record>,
    /// Batches written, with whether a flush has covered them.
    pub batches: Vec<(Placed, bool)>,
    state: Vec<DevState>,
}

impl Writer {
    pub fn new(devs: Vec<SimDevice>) -> Writer {
        let state = devs
            .iter()
            .map(|d| DevState {
                queue: d.open_queue().unwrap(),
                next_seq: 1,
                next_segment: 0,
                current: None,
            })
            .collect();
        Writer {
            geo: Geometry::new(devs[0].info(), SEGMENT),
            devs,
            appliance: APPLIANCE,
            epoch: 1,
            next_lsn: 1,
            durable: 0,
            log: BTreeMap::new(),
            batches: Vec::new(),
            state,
        }
    }

    /// Goes on after `rec`, as the real writer will: next epoch, LSN, seq
    /// and segment from recovery, keeping the recovered records as truth.
    pub fn resume(devs: Vec<SimDevice>, rec: &Recovered) -> Writer {
        let mut w = Writer::new(devs);
        w.epoch = rec.epoch + 1;
        w.next_lsn = rec.next_lsn;
        w.durable = rec.durable_lsn;
        for (s, log) in w.state.iter_mut().zip(&rec.devices) {
            s.next_seq = log.next_seq;
            s.next_segment = log.next_segment;
        }
        w.log = rec.records.iter().map(|r| (r.lsn, r.clone())).collect();
        w
    }

    /// Makes the next segment started on `dev` be `segment` (to reuse one).
    pub fn start_next_at(&mut self, dev: usize, segment: u64) {
        self.state[dev].next_segment = segment;
        self.state[dev].current = None;
    }

    /// Uses up `count` LSNs without writing them anywhere.
    pub fn skip(&mut self, count: u64) {
        self.next_lsn += count;
    }

    /// Writes a batch of `records` (LSNs assigned here) to `dev`, with the
    /// honest durable LSN unless `durable` overrides it.
    pub fn write(&mut self, dev: usize, records: &[Record], durable: Option<Lsn>) -> Placed {
        let mut b = BatchBuilder::new(self.devs[dev].alloc_buf(MAX_BATCH), BS);
        for r in records {
            b.push(r.as_ref());
        }
        let blocks = (b.padded_len() / BS as usize) as u64;
        let first_lsn = self.next_lsn;
        let (segment, seq, lba) = self.room(dev, blocks, first_lsn);
        let (buf, len) = b.seal(first_lsn, seq, durable.unwrap_or(self.durable), self.epoch);
        assert_eq!(buf.len(), len);
        let q = &mut self.state[dev].queue;
        wait::run(q, Request::write(0, lba, vec![buf]))
            .unwrap()
            .result
            .unwrap();
        for (i, r) in records.iter().enumerate() {
            let lsn = first_lsn + i as u64;
            self.log.insert(lsn, Record { lsn, ..r.clone() });
        }
        self.next_lsn += records.len() as u64;
        let placed = Placed {
            dev,
            segment,
            offset: lba * u64::from(BS),
            first_lsn,
            count: records.len() as u32,
        };
        self.batches.push((placed, false));
        placed
    }

    /// Where `blocks` blocks go on `dev`, starting a segment if needed.
    fn room(&mut self, dev: usize, blocks: u64, first_lsn: Lsn) -> (u64, u64, u64) {
        let geo = self.geo;
        let s = &mut self.state[dev];
        if let Some((seg, seq, lba)) = s.current {
            if lba + blocks <= geo.segment_lba(seg) + geo.seg_blocks {
                s.current = Some((seg, seq, lba + blocks));
                return (seg, seq, lba);
            }
        }
        let (seg, seq) = (s.next_segment, s.next_seq);
        assert!(seq <= 2 * geo.segments, "the test log outgrew its devices");
        s.next_segment = (seg + 1) % geo.segments;
        s.next_seq += 1;
        let mut head = self.devs[dev].alloc_buf(BS as usize);
        SegmentHeader {
            device_index: dev as u32,
            appliance_id: self.appliance,
            seq,
            epoch: self.epoch,
            first_lsn,
            released: 0,
        }
        .encode(&mut head);
        let at = geo.segment_lba(seg);
        wait::run(&mut s.queue, Request::write(0, at, vec![head]))
            .unwrap()
            .result
            .unwrap();
        s.current = Some((seg, seq, at + 1 + blocks));
        (seg, seq, at + 1)
    }

    /// Flushes `dev` and advances the durable LSN as far as every batch up
    /// to it has been flushed.
    pub fn flush(&mut self, dev: usize) {
        let q = &mut self.state[dev].queue;
        wait::run(q, Request::flush(0)).unwrap().result.unwrap();
        for (p, flushed) in &mut self.batches {
            *flushed |= p.dev == dev;
        }
        let mut pending: Vec<&(Placed, bool)> = self.batches.iter().collect();
        pending.sort_by_key(|(p, _)| p.first_lsn);
        for (p, flushed) in pending {
            if p.last_lsn() <= self.durable {
                continue;
            }
            if !flushed || p.first_lsn != self.durable + 1 {
                break;
            }
            self.durable = p.last_lsn();
        }
    }

    pub fn flush_all(&mut self) {
        (0..self.devs.len()).for_each(|d| self.flush(d));
    }

    /// The records written from `from` up to (excluding) `to`.
    pub fn expected(&self, from: Lsn, to: Lsn) -> Vec<Record> {
        self.log.range(from..to).map(|(_, r)| r.clone()).collect()
    }
}

/// `n` records of assorted shapes, LSNs left 0 (the writer assigns them).
pub fn records(rng: &mut impl Rng, n: usize) -> Vec<Record> {
    (0..n)
        .map(|_| {
            let delete = rng.random_bool(0.2);
            let key: Vec<u8> = (0..rng.random_range(1..40)).map(|_| rng.random()).collect();
            let value: Vec<u8> = if delete {
                Vec::new()
            } else {
                (0..rng.random_range(0..1500))
                    .map(|_| rng.random())
                    .collect()
            };
            Record {
                lsn: 0,
                op: if delete {
                    RecordOp::Delete
                } else {
                    RecordOp::Put
                },
                region: rng.random_range(0..4),
                key,
                value,
            }
        })
        .collect()
}

/// Flips one byte of the payload of the batch at `p`.
pub fn corrupt_payload(devs: &[SimDevice], p: &Placed) {
    corrupt_byte(devs, p, 70); // inside the first record: payload, never padding
}

/// Flips byte `at` of the first block of the batch at `p`.
pub fn corrupt_byte(devs: &[SimDevice], p: &Placed, at: usize) {
    let lba = p.offset / u64::from(BS);
    let mut block = devs[p.dev].visible_read(lba, 1);
    block[at] ^= 0x5a;
    let mut q = devs[p.dev].open_queue().unwrap();
    let mut buf = devs[p.dev].alloc_buf(BS as usize);
    buf.copy_from_slice(&block);
    wait::run(&mut q, Request::write(0, lba, vec![buf]))
        .unwrap()
        .result
        .unwrap();
}

/// True when the first block of the batch at `p` is all zero.
pub fn zeroed(devs: &[SimDevice], p: &Placed) -> bool {
    devs[p.dev]
        .visible_read(p.offset / u64::from(BS), 1)
        .iter()
        .all(|&b| b == 0)
}
