//! Round trips and decoder fuzzing of the WAL format.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::device::IoBuf;

const BS: u32 = 4096;

fn sample_records(n: usize) -> Vec<Record> {
    (0..n)
        .map(|i| Record {
            lsn: 100 + i as u64,
            op: if i % 3 == 2 {
                RecordOp::Delete
            } else {
                RecordOp::Put
            },
            region: i as u32 % 4,
            key: format!("key-{i}").into_bytes(),
            value: if i % 3 == 2 {
                Vec::new()
            } else {
                vec![i as u8; i * 37 % 300]
            },
        })
        .collect()
}

/// A sealed batch of `records` (LSNs from the first record), max 4 blocks.
fn sealed(records: &[Record]) -> IoBuf {
    let mut b = BatchBuilder::new(IoBuf::new(4 * BS as usize), BS);
    for r in records {
        b.push(r.as_ref());
    }
    let expect = b.padded_len();
    let (buf, len) = b.seal(records[0].lsn, 7, records[0].lsn - 1, 3);
    assert_eq!((buf.len(), len), (expect, expect));
    buf
}

#[test]
fn segment_header_round_trip_and_blank() {
    let h = SegmentHeader {
        device_index: 2,
        appliance_id: 0xfeed_beef_0000_1111_2222_3333_4444_5555,
        seq: 42,
        epoch: 9,
        first_lsn: 1234,
        released: 1200,
    };
    let mut block = vec![0xAA; BS as usize];
    h.encode(&mut block);
    assert!(block[SEGMENT_HEADER_BYTES..].iter().all(|&b| b == 0));
    assert_eq!(SegmentHeader::decode(&block), Ok(h));
    assert_eq!(
        SegmentHeader::decode(&[0; 4096]),
        Err(FormatError::NotASegment)
    );
    for bit in 0..SEGMENT_HEADER_BYTES * 8 {
        let mut bad = block.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        assert!(
            SegmentHeader::decode(&bad).is_err(),
            "bit {bit} went unnoticed"
        );
    }
}

#[test]
fn batch_round_trip() {
    let records = sample_records(20);
    let buf = sealed(&records);
    let h = decode_batch_header(&buf, buf.len()).unwrap();
    assert_eq!(
        (h.first_lsn, h.count, h.segment_seq, h.durable_lsn, h.epoch),
        (100, 20, 7, 99, 3)
    );
    assert_eq!(h.padded_len(BS), buf.len());
    assert_eq!(h.last_lsn(), 119);
    let end = BATCH_HEADER_BYTES + h.payload_len as usize;
    assert!(buf[end..].iter().all(|&b| b == 0), "padding is zero");
    let back = decode_records(&h, &buf[BATCH_HEADER_BYTES..end]).unwrap();
    assert_eq!(back, records);
}

#[test]
fn builder_fits_exactly_to_the_buffer() {
    let mut b = BatchBuilder::new(IoBuf::new(BS as usize), BS);
    let room = BS as usize - BATCH_HEADER_BYTES - RECORD_HEADER_BYTES;
    assert!(b.fits(room, 0));
    assert!(!b.fits(room + 1, 0));
    assert!(b.is_empty());
    b.push(RecordRef {
        op: RecordOp::Put,
        region: 1,
        key: &vec![1; room - 10],
        value: &[2; 10],
    });
    assert_eq!((b.count(), b.padded_len()), (1, BS as usize));
    assert!(!b.fits(0, 0));
    let (buf, len) = b.seal(1, 1, 0, 1);
    let h = decode_batch_header(&buf, len).unwrap();
    assert_eq!(
        decode_records(&h, &buf[BATCH_HEADER_BYTES..])
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn reused_buffer_gets_zero_padding() {
    let mut dirty = IoBuf::new(2 * BS as usize);
    dirty.fill(0xEE);
    let mut b = BatchBuilder::new(dirty, BS);
    let recs = sample_records(1);
    b.push(recs[0].as_ref());
    let (buf, _) = b.seal(5, 1, 4, 1);
    let h = decode_batch_header(&buf, buf.len()).unwrap();
    let end = BATCH_HEADER_BYTES + h.payload_len as usize;
    assert!(buf[end..].iter().all(|&b| b == 0));
    assert_eq!(buf.len(), BS as usize);
}

#[test]
fn header_sanity_is_checked() {
    let buf = sealed(&sample_records(3));
    let h = decode_batch_header(&buf, buf.len()).unwrap();
    let total = BATCH_HEADER_BYTES + h.payload_len as usize;
    assert!(decode_batch_header(&buf, total).is_ok());
    assert!(matches!(
        decode_batch_header(&buf, total - 1),
        Err(FormatError::BadHeader(_))
    ));
    assert_eq!(
        decode_batch_header(&[0; 4096], 1 << 20),
        Err(FormatError::NotABatch)
    );
    for bit in 0..BATCH_HEADER_BYTES * 8 {
        let mut bad = buf.to_vec();
        bad[bit / 8] ^= 1 << (bit % 8);
        assert!(
            decode_batch_header(&bad, 1 << 20).is_err(),
            "bit {bit} went unnoticed"
        );
    }
}

#[test]
fn flipped_payload_byte_is_a_checksum_error() {
    let mut buf = sealed(&sample_records(5));
    let h = decode_batch_header(&buf, buf.len()).unwrap();
    buf[BATCH_HEADER_BYTES + 3] ^= 0x10;
    let end = BATCH_HEADER_BYTES + h.payload_len as usize;
    assert!(matches!(
        decode_records(&h, &buf[BATCH_HEADER_BYTES..end]),
        Err(FormatError::BadPayloadChecksum { .. })
    ));
}

/// A header that matches `payload` (valid checksum), so that the record
/// parser itself is exercised on arbitrary bytes.
fn header_for(payload: &[u8], count: u32) -> BatchHeader {
    BatchHeader {
        first_lsn: 1,
        count,
        payload_len: payload.len() as u32,
        segment_seq: 1,
        durable_lsn: 0,
        epoch: 1,
        payload_crc: crc32c::crc32c(payload),
    }
}

#[test]
fn bad_records_inside_a_good_checksum_are_errors() {
    let mut payload = vec![0u8; 13];
    payload[0] = 9;
    assert!(matches!(
        decode_records(&header_for(&payload, 1), &payload),
        Err(FormatError::BadRecord { index: 0, .. })
    ));
    payload[0] = 2; // delete with a value
    payload[9] = 1;
    payload.push(0);
    assert!(matches!(
        decode_records(&header_for(&payload, 1), &payload),
        Err(FormatError::BadRecord { index: 0, .. })
    ));
    payload[0] = 1; // a put whose value fits, then a trailing byte
    payload.push(0);
    assert!(matches!(
        decode_records(&header_for(&payload, 1), &payload),
        Err(FormatError::BadRecord { .. })
    ));
    let lying = header_for(&payload, u32::MAX);
    assert!(decode_records(&lying, &payload).is_err());
}

#[test]
fn decoders_never_panic_on_random_or_mutated_input() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5741_4c46);
    let good = sealed(&sample_records(12));
    for i in 0..10_000 {
        let mut bytes = if i % 2 == 0 {
            let mut b = vec![0u8; rng.random_range(0..3 * BS as usize)];
            rng.fill(&mut b[..]);
            if rng.random_bool(0.5) && b.len() >= 8 {
                b[..8].copy_from_slice(&BATCH_MAGIC);
            }
            b
        } else {
            let mut b = good.to_vec();
            for _ in 0..rng.random_range(1..8) {
                let at = rng.random_range(0..b.len());
                b[at] = rng.random();
            }
            b.truncate(rng.random_range(0..=b.len()));
            b
        };
        let _ = SegmentHeader::decode(&bytes);
        if let Ok(h) = decode_batch_header(&bytes, 1 << 20) {
            let end = (BATCH_HEADER_BYTES + h.payload_len as usize).min(bytes.len());
            let _ = decode_records(&h, &bytes[BATCH_HEADER_BYTES..end]);
        }
        // The record parser behind a matching checksum, with any count.
        if bytes.len() > BATCH_HEADER_BYTES {
            let payload = &mut bytes[BATCH_HEADER_BYTES..];
            let count = rng.random_range(0..40);
            let _ = decode_records(&header_for(payload, count), payload);
        }
    }
}
