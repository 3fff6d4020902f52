/* SPDX-License-Identifier: GPL-2.0 */
/*
 * msr_helper's pure decisions, kept apart from the kernel code so that a userspace unit test
 * (tests/unit/backend/test_msr_helper_logic.cc) checks them on every CPU model, paging mode and
 * register state that no test machine has: the LBR MSR layout per model, how LBR addresses are
 * made canonical, and when another user owns the LBR.
 *
 * Facts from Linux's arch/x86/events/intel/{lbr,core}.c and the SDM (vol. 3, "Last Branch,
 * Interrupt, and Exception Recording"); see docs in kmod-helper/README.md.
 */
#ifndef MSR_HELPER_LOGIC_H
#define MSR_HELPER_LOGIC_H

#include <linux/types.h>

#define MSRH_DEBUGCTL_LBR (1ull << 0)
#define MSRH_DEBUGCTL_TR (1ull << 6)  /* branch trace messages (BTS needs it) */
#define MSRH_DEBUGCTL_BTS (1ull << 7) /* branch trace store: perf's BTS event */
#define MSRH_RTIT_CTL_TRACEEN (1ull << 0)
#define MSRH_LBR_SELECT_CPL_EQ_0 (1ull << 0)   /* suppress branches that end in ring 0 */
#define MSRH_LBR_SELECT_FAR_BRANCH (1ull << 8) /* suppress far branches (syscall/irq/iret) */
#define MSRH_LBR_SELECT_USER (MSRH_LBR_SELECT_CPL_EQ_0 | MSRH_LBR_SELECT_FAR_BRANCH)

struct msrh_layout {
	__u32 depth, from, to, info; /* MSR bases; 0 = absent */
	const char *name;
};

static const __u8 msrh_models_skl32[] = { /* Skylake and later (non-arch LBR), Goldmont(+), Tremont */
	0x4e, 0x5e, 0x55, 0x8e, 0x9e, 0x66, 0x6a, 0x6c, 0x7d, 0x7e, 0xa5, 0xa6,
	0x8c, 0x8d, 0xa7, 0x5c, 0x5f, 0x7a, 0x86, 0x96, 0x9c,
};
static const __u8 msrh_models_nhm16[] = { /* Nehalem .. Broadwell */
	0x1a, 0x1e, 0x1f, 0x2e, 0x25, 0x2c, 0x2f, 0x2a, 0x2d, 0x3a, 0x3e, 0x3c, 0x3f,
	0x45, 0x46, 0x3d, 0x47, 0x4f, 0x56,
};
static const __u8 msrh_models_knl8[] = { 0x57, 0x85 }; /* Knights Landing, Knights Mill */
static const __u8 msrh_models_atom8[] = { /* Bonnell, Saltwell, Silvermont, Airmont */
	0x1c, 0x26, 0x27, 0x35, 0x36, 0x37, 0x4d, 0x4a, 0x5a, 0x5d, 0x4c,
};
static const __u8 msrh_models_core2[] = { 0x0f, 0x16, 0x17, 0x1d };

static inline int msrh_model_in(__u32 model, const __u8 *list, unsigned long n)
{
	unsigned long i;

	for (i = 0; i < n; i++)
		if (list[i] == model)
			return 1;
	return 0;
}

#define MSRH_IN(model, list) msrh_model_in((model), (list), sizeof(list))

/*
 * The LBR stack of an Intel family-6 `model` whose PERF_CAPABILITIES says LBR format `fmt`
 * (0 when unknown), as Linux's intel_pmu_lbr_init_*() sets it up. Knights Landing/Mill have 8
 * entries at the Nehalem addresses (0x680/0x6c0), not the Atom ones (0x40/0x60).
 */
static inline struct msrh_layout msrh_layout_for(__u32 model, __u32 fmt)
{
	struct msrh_layout l = { 0, 0, 0, 0, "none" };

	if (MSRH_IN(model, msrh_models_knl8)) {
		l.depth = 8, l.from = 0x680, l.to = 0x6c0, l.name = "knl";
	} else if (MSRH_IN(model, msrh_models_skl32) ||
		   (fmt >= 5 && fmt != 0x3f && !MSRH_IN(model, msrh_models_nhm16) &&
		    !MSRH_IN(model, msrh_models_atom8) && !MSRH_IN(model, msrh_models_core2))) {
		l.depth = 32, l.from = 0x680, l.to = 0x6c0, l.name = "skylake";
		if (fmt == 5 || fmt == 7)
			l.info = 0xdc0;
	} else if (MSRH_IN(model, msrh_models_nhm16)) {
		l.depth = 16, l.from = 0x680, l.to = 0x6c0, l.name = "nehalem";
	} else if (MSRH_IN(model, msrh_models_atom8)) {
		l.depth = 8, l.from = 0x40, l.to = 0x60, l.name = "atom";
	} else if (MSRH_IN(model, msrh_models_core2)) {
		l.depth = 4, l.from = 0x40, l.to = 0x60, l.name = "core2";
	}
	return l;
}

/* LBR and PT can run at once (Linux's x86_pmu.lbr_pt_coexist): Skylake and Goldmont on. */
static inline int msrh_lbr_pt_coexist(const struct msrh_layout *l)
{
	return l->depth == 32;
}

/*
 * An address as an instruction pointer: sign-extended from the top bit of the virtual address
 * space, which is bit 56 with 5-level paging (LA57) and bit 47 with 4-level paging. (Cutting at
 * bit 47 always would corrupt user addresses above 128 TiB on LA57 machines.)
 */
static inline __u64 msrh_canonical(__u64 v, unsigned va_bits)
{
	unsigned shift = 64 - va_bits;

	return (__u64)(((__s64)(v << shift)) >> shift);
}

/* Formats 3 and 4 keep flags in the top bits of LASTBRANCH_FROM (3: MISPRED in bit 63; 4:
 * MISPRED, IN_TX, ABORT in bits 63..61): msrh_canonical() replaces them with the sign. */

/* Why the LBR of a CPU belongs to someone else (0: it is free). */
#define MSRH_BUSY_LBR 1u /* DEBUGCTL.LBR is on: perf's LBR users, a KVM guest's vLBR */
#define MSRH_BUSY_BTS 2u /* DEBUGCTL.TR/BTS: perf's BTS event, which perf never shares with LBR */
#define MSRH_BUSY_PT 4u  /* PT is tracing, on CPUs where perf keeps PT and LBR apart */

/*
 * LBR_SELECT is not looked at: perf leaves its last filter there when its LBR user goes away
 * (e.g. after `perf record -j any,u`), and a stale filter means nothing.
 */
static inline unsigned msrh_busy(__u64 debugctl, __u64 rtit_ctl, int lbr_pt_coexist)
{
	unsigned why = 0;

	if (debugctl & MSRH_DEBUGCTL_LBR)
		why |= MSRH_BUSY_LBR;
	if (debugctl & (MSRH_DEBUGCTL_TR | MSRH_DEBUGCTL_BTS))
		why |= MSRH_BUSY_BTS;
	if ((rtit_ctl & MSRH_RTIT_CTL_TRACEEN) && !lbr_pt_coexist)
		why |= MSRH_BUSY_PT;
	return why;
}

/*
 * At switch-out: is the LBR still as the module left it at switch-in? If someone reprogrammed
 * LBR_SELECT meanwhile (perf enabling its own LBR user), the stack and DEBUGCTL.LBR are theirs
 * now: the module must neither read them as its thread's nor turn them off.
 */
static inline int msrh_still_ours(__u64 lbr_select, __u64 debugctl)
{
	return lbr_select == MSRH_LBR_SELECT_USER && !(debugctl & (MSRH_DEBUGCTL_TR | MSRH_DEBUGCTL_BTS));
}

#endif /* MSR_HELPER_LOGIC_H */
