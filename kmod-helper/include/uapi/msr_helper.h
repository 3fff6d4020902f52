/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * msr_helper: ioctl ABI between the msr_helper kernel module and its userspace clients
 * (branchstub's backend/btrace/lbr/lbr_device.cc, kmod-helper/tests/selftest.c).
 *
 * Rules of this ABI:
 *  - every struct is fixed-size, naturally aligned, with explicit padding (no implicit holes),
 *    and starts with a `size` field the caller sets to sizeof(struct); the module refuses any
 *    other size with EINVAL. Reserved fields must be zero on input (EINVAL otherwise) and are
 *    zero on output.
 *  - layouts are identical for 32- and 64-bit userspace (no pointers, no longs).
 *  - MSRH_ABI_VERSION changes only when an existing struct or ioctl changes meaning; new
 *    ioctls get new numbers. MSRH_IOC_INFO reports the module's version.
 *  - there is no MSR write ioctl, and there never will be one.
 *
 * Usable from the kernel, from C (C99+) and from C++.
 */
#ifndef MSR_HELPER_UAPI_H
#define MSR_HELPER_UAPI_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define MSRH_ABI_VERSION 1u
#define MSRH_DEVICE_NAME "msr_helper"
#define MSRH_DEVICE_PATH "/dev/msr_helper"
#define MSRH_LBR_MAX 32u /* entries in a snapshot (largest model-specific LBR stack) */

/* msrh_info.vendor */
#define MSRH_VENDOR_UNKNOWN 0u
#define MSRH_VENDOR_INTEL 1u
#define MSRH_VENDOR_AMD 2u
#define MSRH_VENDOR_HYGON 3u

/* msrh_info.features: what the module found at load time */
#define MSRH_FEAT_LBR (1u << 0)        /* DEBUGCTL.LBR stuck in the write-and-read-back probe */
#define MSRH_FEAT_LBR_SELECT (1u << 1) /* LBR_SELECT stuck in the write-and-read-back probe */
#define MSRH_FEAT_LBR_TOS (1u << 2)    /* LASTBRANCH_TOS is readable */
#define MSRH_FEAT_LBR_INFO (1u << 3)   /* LBR_INFO MSRs exist (format 5/7): entry.info is real */
#define MSRH_FEAT_PDCM (1u << 4)       /* CPUID.1:ECX.PDCM, PERF_CAPABILITIES readable */
#define MSRH_FEAT_ARCH_LBR (1u << 5)   /* CPU has architectural LBR (not driven by ABI v1) */
#define MSRH_FEAT_HYPERVISOR (1u << 6) /* running under a hypervisor */
#define MSRH_FEAT_LOCKDOWN (1u << 7)   /* kernel lockdown forbids LBR_ATTACH */
#define MSRH_FEAT_SIMULATED (1u << 31) /* simulate_lbr=1: TEST ONLY, snapshots are synthetic */

struct msrh_info {
	__u32 size;          /* in: sizeof(struct msrh_info) */
	__u32 abi_version;   /* out: MSRH_ABI_VERSION of the module */
	__u32 vendor;        /* MSRH_VENDOR_* */
	__u32 family;        /* CPUID family (extended family folded in) */
	__u32 model;         /* CPUID model (extended model folded in) */
	__u32 stepping;
	__u32 lbr_format;    /* PERF_CAPABILITIES[5:0], 0 when unknown */
	__u32 lbr_depth;     /* entries in the LBR stack, 0 when none */
	__u32 lbr_from_msr;  /* first LASTBRANCH_FROM MSR, 0 when none */
	__u32 lbr_to_msr;    /* first LASTBRANCH_TO MSR, 0 when none */
	__u32 lbr_info_msr;  /* first LBR_INFO MSR, 0 when none */
	__u32 features;      /* MSRH_FEAT_* */
	__u32 live_targets;  /* attached threads, module-wide */
	__u32 live_objects;  /* allocations outstanding (open files + targets), module-wide */
	__u64 reserved[4];
};

/* LBR_ATTACH / LBR_DETACH argument */
struct msrh_lbr_target {
	__u32 size;     /* in: sizeof(struct msrh_lbr_target) */
	__s32 pid;      /* in: thread id (as in gettid()/ptrace) of a thread the caller ptraces */
	__u32 flags;    /* in: must be 0 (filter is chosen by the module: user branches only) */
	__u32 reserved; /* must be 0 */
};

struct msrh_lbr_entry {
	__u64 from; /* canonical (sign-extended) source address */
	__u64 to;   /* canonical destination address */
	__u64 info; /* LBR_INFO layout: bit 63 MISPRED, 62 IN_TX, 61 ABORT, [15:0] cycles; 0 if none */
};

/* msrh_lbr_snapshot.flags */
#define MSRH_SNAP_INT3 (1u << 0)      /* taken in the thread's user int3 (#BP) trap */
#define MSRH_SNAP_DEBUG (1u << 1)     /* taken in the thread's user debug (#DB) trap */
#define MSRH_SNAP_SWITCH (1u << 2)    /* taken when the thread was switched out */
#define MSRH_SNAP_SIMULATED (1u << 3) /* synthetic entries (simulate_lbr=1, TEST ONLY) */
#define MSRH_SNAP_CONFLICT (1u << 4)  /* another owner held the LBR: entries may be missing */

/*
 * Snapshot of the thread's LBR stack taken at its last stop.  entries[0] is the newest branch.
 * Simulated entries (TEST ONLY) are: with A = ip - 1 for an int3 trap and A = ip otherwise,
 * entries[k] = { .from = A - 0x10 * k - 0x20, .to = A - 0x10 * k, .info = MSRH_SIM_INFO(k) },
 * count = MSRH_SIM_COUNT.
 */
struct msrh_lbr_snapshot {
	__u32 size;      /* in: sizeof(struct msrh_lbr_snapshot) */
	__s32 pid;       /* in: thread id */
	__u32 count;     /* out: valid entries (0 before the first stop after attach) */
	__u32 flags;     /* out: MSRH_SNAP_* */
	__u64 seq;       /* out: increases with every snapshot the module takes; 0 = none yet */
	__u64 ip;        /* out: the thread's user ip when the snapshot was taken */
	__u32 cpu;       /* out: CPU the snapshot was read on */
	__u32 reserved0; /* must be 0 */
	__u64 reserved[2];
	struct msrh_lbr_entry entries[MSRH_LBR_MAX];
};

#define MSRH_SIM_COUNT 16u
#define MSRH_SIM_INFO(k) (0x5100000000000000ull | (__u64)(k))
/*
 * TEST ONLY: with simulate_lbr=1 the module keeps a 16-deep simulated LBR stack per CPU, which at
 * load holds "someone else's" branches at MSRH_SIM_FOREIGN + 0x100 * i; the module must clear it
 * when it first switches an attached thread in, so no snapshot may ever contain them.
 */
#define MSRH_SIM_FOREIGN 0x7e0000000000ull

/* RDMSR argument: read-only, whitelisted MSRs on the calling CPU */
struct msrh_rdmsr {
	__u32 size;     /* in: sizeof(struct msrh_rdmsr) */
	__u32 msr;      /* in: MSR index (see the whitelist in kmod-helper/README.md) */
	__u64 value;    /* out */
	__u32 cpu;      /* out: CPU it was read on */
	__u32 reserved; /* must be 0 */
};

/* Sizes are part of the ABI: userspace tests static_assert them. */
#define MSRH_INFO_SIZE 88u
#define MSRH_LBR_TARGET_SIZE 16u
#define MSRH_LBR_ENTRY_SIZE 24u
#define MSRH_LBR_SNAPSHOT_SIZE 824u
#define MSRH_RDMSR_SIZE 24u

#define MSRH_IOC_MAGIC 0xB5
#define MSRH_IOC_INFO _IOWR(MSRH_IOC_MAGIC, 0x00, struct msrh_info)
#define MSRH_IOC_LBR_ATTACH _IOW(MSRH_IOC_MAGIC, 0x01, struct msrh_lbr_target)
#define MSRH_IOC_LBR_DETACH _IOW(MSRH_IOC_MAGIC, 0x02, struct msrh_lbr_target)
#define MSRH_IOC_LBR_SNAPSHOT _IOWR(MSRH_IOC_MAGIC, 0x03, struct msrh_lbr_snapshot)
#define MSRH_IOC_RDMSR _IOWR(MSRH_IOC_MAGIC, 0x04, struct msrh_rdmsr)
/*
 * TEST ONLY: with simulate_lbr=1, set one simulated register (DEBUGCTL, LBR_SELECT, TOS,
 * RTIT_CTL) on every CPU, to play another LBR/BTS/PT user; `cpu` is ignored. ENOTTY when the
 * module drives real MSRs: it never writes an MSR a caller chose.
 */
#define MSRH_IOC_SIM_SET _IOW(MSRH_IOC_MAGIC, 0x10, struct msrh_rdmsr)

/* The MSRs RDMSR accepts (plus the LBR FROM/TO/INFO ranges of this CPU, see msrh_info) */
#define MSRH_MSR_LBR_SELECT 0x1c8u
#define MSRH_MSR_LBR_TOS 0x1c9u
#define MSRH_MSR_DEBUGCTL 0x1d9u
#define MSRH_MSR_MISC_ENABLE 0x1a0u
#define MSRH_MSR_PERF_CAPABILITIES 0x345u
#define MSRH_MSR_RTIT_CTL 0x570u

#endif /* MSR_HELPER_UAPI_H */
