/*
 * The part of SPDK that Stria uses, as a handful of plain C functions.
 *
 * Rust binds only these (src/device/spdk/ffi.rs), never SPDK's own structs,
 * so a change in SPDK's struct layouts breaks this file's compilation rather
 * than Stria's memory safety.
 *
 * A `stria_qpair` is one I/O queue pair together with what its commands
 * need while in flight: one `stria_req` per slot (the slot is Stria's index
 * of an in-flight request, below the queue depth), holding the iovec array
 * the SGL callbacks walk, and a ring of finished (slot, status) pairs that
 * the completion callback appends to and `stria_qpair_poll` hands back.
 * Everything in a stria_qpair is touched only by the thread that owns it.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "spdk/env.h"
#include "spdk/nvme.h"

#define STRIA_MAX_PCI_ALLOWED 64

struct stria_env_opts {
	const char *name;
	const char *core_mask;
	int mem_size_mb;
	int shm_id;
	bool no_huge;
	bool no_pci;
	/* PCI addresses (DDDD:BB:DD.F) the environment may probe; empty = all. */
	const char *const *pci_allowed;
	size_t num_pci_allowed;
};

struct stria_ns_info {
	uint32_t sector_size;
	uint64_t num_sectors;
	uint32_t max_xfer_size;
	bool volatile_cache;
	bool flush_supported;
};

struct stria_cpl {
	uint32_t slot;
	uint16_t sct;
	uint16_t sc;
};

struct stria_qpair;

struct stria_req {
	struct stria_qpair *qp;
	uint32_t slot;
	const struct iovec *iov;
	int iovcnt;
	int idx;
	size_t off;
};

struct stria_qpair {
	struct spdk_nvme_qpair *qpair;
	struct spdk_nvme_ns *ns;
	uint32_t depth;
	struct stria_req *reqs;
	struct stria_cpl *ring;
	uint32_t ring_len;
	/* Completions that found the ring full (never, by the depth limit). */
	uint64_t lost;
};

/*
 * Initialises SPDK's environment (DPDK EAL) once per process. EAL pins the
 * calling thread to its main core; the thread's own affinity is put back
 * afterwards, since the caller is whatever thread opened the first device.
 */
int stria_env_init(const struct stria_env_opts *o)
{
	struct spdk_env_opts opts;
	struct spdk_pci_addr allowed[STRIA_MAX_PCI_ALLOWED];
	cpu_set_t saved;
	bool restore;
	int rc;

	if (o->num_pci_allowed > STRIA_MAX_PCI_ALLOWED) {
		return -E2BIG;
	}
	memset(&opts, 0, sizeof(opts));
	opts.opts_size = sizeof(opts);
	spdk_env_opts_init(&opts);
	opts.name = o->name;
	opts.core_mask = o->core_mask;
	opts.mem_size = o->mem_size_mb;
	opts.shm_id = o->shm_id;
	opts.no_huge = o->no_huge;
	opts.no_pci = o->no_pci;
	for (size_t i = 0; i < o->num_pci_allowed; i++) {
		if (spdk_pci_addr_parse(&allowed[i], o->pci_allowed[i]) != 0) {
			return -EINVAL;
		}
	}
	if (o->num_pci_allowed > 0) {
		opts.pci_allowed = allowed;
		opts.num_pci_addr = o->num_pci_allowed;
	}
	restore = sched_getaffinity(0, sizeof(saved), &saved) == 0;
	rc = spdk_env_init(&opts);
	if (restore) {
		sched_setaffinity(0, sizeof(saved), &saved);
	}
	return rc;
}

/* Connects to the controller named by an SPDK transport ID string. */
struct spdk_nvme_ctrlr *stria_ctrlr_connect(const char *trid_str, uint32_t keep_alive_ms,
		uint32_t io_queue_size)
{
	struct spdk_nvme_transport_id trid;
	struct spdk_nvme_ctrlr_opts opts;

	memset(&trid, 0, sizeof(trid));
	if (spdk_nvme_transport_id_parse(&trid, trid_str) != 0) {
		errno = EINVAL;
		return NULL;
	}
	spdk_nvme_ctrlr_get_default_ctrlr_opts(&opts, sizeof(opts));
	opts.keep_alive_timeout_ms = keep_alive_ms;
	if (io_queue_size > opts.io_queue_size) {
		opts.io_queue_size = io_queue_size;
	}
	return spdk_nvme_connect(&trid, &opts, sizeof(opts));
}

void stria_ctrlr_detach(struct spdk_nvme_ctrlr *ctrlr)
{
	spdk_nvme_detach(ctrlr);
}

int32_t stria_ctrlr_process_admin(struct spdk_nvme_ctrlr *ctrlr)
{
	return spdk_nvme_ctrlr_process_admin_completions(ctrlr);
}

bool stria_ctrlr_is_failed(struct spdk_nvme_ctrlr *ctrlr)
{
	return spdk_nvme_ctrlr_is_failed(ctrlr);
}

/* What namespace `nsid` is; -ENODEV when it is not active. */
int stria_ns_info(struct spdk_nvme_ctrlr *ctrlr, uint32_t nsid, struct stria_ns_info *out)
{
	struct spdk_nvme_ns *ns = spdk_nvme_ctrlr_get_ns(ctrlr, nsid);
	const struct spdk_nvme_ctrlr_data *cd = spdk_nvme_ctrlr_get_data(ctrlr);

	if (ns == NULL || !spdk_nvme_ns_is_active(ns)) {
		return -ENODEV;
	}
	out->sector_size = spdk_nvme_ns_get_sector_size(ns);
	out->num_sectors = spdk_nvme_ns_get_num_sectors(ns);
	out->max_xfer_size = spdk_nvme_ns_get_max_io_xfer_size(ns);
	out->volatile_cache = cd->vwc.present != 0;
	out->flush_supported = (spdk_nvme_ns_get_flags(ns) & SPDK_NVME_NS_FLUSH_SUPPORTED) != 0;
	return 0;
}

/* A new I/O queue pair on `ctrlr` for namespace `nsid`, with room for `depth` requests. */
struct stria_qpair *stria_qpair_alloc(struct spdk_nvme_ctrlr *ctrlr, uint32_t nsid,
				      uint32_t depth, uint32_t requests)
{
	struct spdk_nvme_io_qpair_opts opts;
	struct stria_qpair *qp;

	qp = calloc(1, sizeof(*qp));
	if (qp == NULL) {
		return NULL;
	}
	qp->ns = spdk_nvme_ctrlr_get_ns(ctrlr, nsid);
	qp->depth = depth;
	qp->reqs = calloc(depth, sizeof(*qp->reqs));
	qp->ring = calloc(depth, sizeof(*qp->ring));
	if (qp->ns == NULL || qp->reqs == NULL || qp->ring == NULL) {
		errno = qp->ns == NULL ? ENODEV : ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < depth; i++) {
		qp->reqs[i].qp = qp;
		qp->reqs[i].slot = i;
	}
	spdk_nvme_ctrlr_get_default_io_qpair_opts(ctrlr, &opts, sizeof(opts));
	if (depth > opts.io_queue_size) {
		opts.io_queue_size = depth;
	}
	if (requests > opts.io_queue_requests) {
		opts.io_queue_requests = requests;
	}
	qp->qpair = spdk_nvme_ctrlr_alloc_io_qpair(ctrlr, &opts, sizeof(opts));
	if (qp->qpair == NULL) {
		errno = ENXIO;
		goto fail;
	}
	return qp;
fail:
	free(qp->reqs);
	free(qp->ring);
	free(qp);
	return NULL;
}

/* Frees the queue pair; SPDK aborts what is still in flight (into the ring, unread). */
void stria_qpair_free(struct stria_qpair *qp)
{
	spdk_nvme_ctrlr_free_io_qpair(qp->qpair);
	free(qp->reqs);
	free(qp->ring);
	free(qp);
}

static void stria_done(void *arg, const struct spdk_nvme_cpl *cpl)
{
	struct stria_req *req = arg;
	struct stria_qpair *qp = req->qp;

	if (qp->ring_len >= qp->depth) {
		qp->lost++;
		return;
	}
	qp->ring[qp->ring_len].slot = req->slot;
	qp->ring[qp->ring_len].sct = cpl->status.sct;
	qp->ring[qp->ring_len].sc = cpl->status.sc;
	qp->ring_len++;
}

static void stria_reset_sgl(void *arg, uint32_t offset)
{
	struct stria_req *req = arg;

	req->idx = 0;
	req->off = offset;
	while (req->idx < req->iovcnt && req->off >= req->iov[req->idx].iov_len) {
		req->off -= req->iov[req->idx].iov_len;
		req->idx++;
	}
}

static int stria_next_sge(void *arg, void **address, uint32_t *length)
{
	struct stria_req *req = arg;

	if (req->idx >= req->iovcnt) {
		*address = NULL;
		*length = 0;
		return -EINVAL;
	}
	*address = (uint8_t *)req->iov[req->idx].iov_base + req->off;
	*length = (uint32_t)(req->iov[req->idx].iov_len - req->off);
	req->idx++;
	req->off = 0;
	return 0;
}

/*
 * Submits a read or write of `nblocks` at `lba` through the buffers of `iov`,
 * as one command (SPDK splits it where the controller needs). The iovec
 * array and the buffers must stay put until the slot's completion is polled.
 * `fua` sets Force Unit Access on a write: it completes once durable.
 */
int stria_qpair_rw(struct stria_qpair *qp, bool write, bool fua, uint32_t slot, uint64_t lba,
		   uint32_t nblocks, const struct iovec *iov, int iovcnt)
{
	struct stria_req *req;

	if (slot >= qp->depth) {
		return -EINVAL;
	}
	req = &qp->reqs[slot];
	req->iov = iov;
	req->iovcnt = iovcnt;
	req->idx = 0;
	req->off = 0;
	if (write) {
		return spdk_nvme_ns_cmd_writev(qp->ns, qp->qpair, lba, nblocks, stria_done, req,
					       fua ? SPDK_NVME_IO_FLAGS_FORCE_UNIT_ACCESS : 0,
					       stria_reset_sgl, stria_next_sge);
	}
	return spdk_nvme_ns_cmd_readv(qp->ns, qp->qpair, lba, nblocks, stria_done, req, 0,
				      stria_reset_sgl, stria_next_sge);
}

int stria_qpair_flush(struct stria_qpair *qp, uint32_t slot)
{
	if (slot >= qp->depth) {
		return -EINVAL;
	}
	qp->reqs[slot].iov = NULL;
	qp->reqs[slot].iovcnt = 0;
	return spdk_nvme_ns_cmd_flush(qp->ns, qp->qpair, stria_done, &qp->reqs[slot]);
}

/*
 * Processes completions, then moves up to `cap` finished (slot, status)
 * pairs into `out` and stores their number in `*got`. Returns what
 * spdk_nvme_qpair_process_completions returned (negative: the qpair failed).
 */
int32_t stria_qpair_poll(struct stria_qpair *qp, struct stria_cpl *out, uint32_t cap,
			 uint32_t *got)
{
	int32_t rc = spdk_nvme_qpair_process_completions(qp->qpair, 0);
	uint32_t n = qp->ring_len < cap ? qp->ring_len : cap;

	memcpy(out, qp->ring, n * sizeof(*out));
	memmove(qp->ring, qp->ring + n, (qp->ring_len - n) * sizeof(*out));
	qp->ring_len -= n;
	*got = n;
	return rc;
}

/* Disconnects a failed queue pair; SPDK aborts its outstanding commands into the ring. */
void stria_qpair_disconnect(struct stria_qpair *qp)
{
	spdk_nvme_ctrlr_disconnect_io_qpair(qp->qpair);
}

int stria_qpair_failure_reason(struct stria_qpair *qp)
{
	return (int)spdk_nvme_qpair_get_failure_reason(qp->qpair);
}

uint64_t stria_qpair_lost(struct stria_qpair *qp)
{
	return qp->lost;
}

const char *stria_status_string(uint16_t sct, uint16_t sc)
{
	struct spdk_nvme_status status;

	memset(&status, 0, sizeof(status));
	status.sct = sct;
	status.sc = sc;
	return spdk_nvme_cpl_get_status_string(&status);
}

void *stria_dma_zmalloc(size_t size, size_t align)
{
	return spdk_dma_zmalloc(size, align, NULL);
}

void stria_dma_free(void *buf)
{
	spdk_dma_free(buf);
}
