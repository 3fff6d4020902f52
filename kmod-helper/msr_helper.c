// SPDX-License-Identifier: GPL-2.0
/*
 * msr_helper: LBR snapshots taken at a ptrace stop, for branchstub.
 *
 * A tracer (the thread that ptraces a target thread) attaches the target.  While the target
 * runs, the module keeps the CPU's model-specific LBR stack on, filtered to user-mode near
 * branches (LBR_SELECT suppresses CPL0 and far branches).  When the target traps (user int3 or
 * #DB, via the die notifier, in the target's own context) or is switched out (sched_switch
 * tracepoint), the module reads the stack into a per-target snapshot that the tracer fetches
 * with MSRH_IOC_LBR_SNAPSHOT.  See README.md for the ABI and the security model.
 *
 * simulate_lbr=1 is TEST ONLY: no MSR is touched. The MSRs the module uses live in memory,
 * one set per CPU (a 16-deep Skylake-like stack), and a trap "records" synthetic branches into
 * them while the module has the LBR on, so that all of the LBR logic (switch-in/out, reset,
 * busy rules, canonical addresses) and the plumbing (hooks, permissions, lifetime) can be
 * tested where no LBR exists (QEMU TCG).
 */
#define pr_fmt(fmt) "msr_helper: " fmt

#include <linux/capability.h>
#include <linux/fs.h>
#include <linux/hashtable.h>
#include <linux/kdebug.h>
#include <linux/kernel.h>
#include <linux/list.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/percpu.h>
#include <linux/pid.h>
#include <linux/ptrace.h>
#include <linux/rculist.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <linux/sched/task_stack.h>
#include <linux/security.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/tracepoint.h>
#include <linux/uaccess.h>
#include <linux/version.h>
#include <asm/msr.h>
#include <asm/processor.h>

#include "include/uapi/msr_helper.h"
#include "msr_helper_logic.h"

/* ---- version shims ------------------------------------------------------------------------ */

#if LINUX_VERSION_CODE < KERNEL_VERSION(5, 10, 0)
#error "msr_helper needs Linux 5.10 or later"
#endif

/* 6.16 renamed rdmsrl_safe()/wrmsrl_safe() to rdmsrq_safe()/wrmsrq_safe() (tip x86/msr). */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 16, 0)
#define msrh_rdmsr_safe(msr, p) rdmsrq_safe((msr), (p))
#define msrh_wrmsr_safe(msr, v) wrmsrq_safe((msr), (v))
#else
#define msrh_rdmsr_safe(msr, p) rdmsrl_safe((msr), (p))
#define msrh_wrmsr_safe(msr, v) wrmsrl_safe((msr), (v))
#endif

/* 5.18 added `unsigned int prev_state` to sched_switch. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(5, 18, 0)
#define MSRH_SWITCH_PROTO \
	void *data, bool preempt, struct task_struct *prev, struct task_struct *next, \
	unsigned int prev_state
#else
#define MSRH_SWITCH_PROTO \
	void *data, bool preempt, struct task_struct *prev, struct task_struct *next
#endif

/* 6.16 added `bool group_dead` to sched_process_exit (and moved it before exit_mm()). */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 16, 0)
#define MSRH_EXIT_PROTO void *data, struct task_struct *p, bool group_dead
#else
#define MSRH_EXIT_PROTO void *data, struct task_struct *p
#endif

/* ---- MSRs (our own names: msr-index.h names drift between versions) ------------------------ */

#define MSRH_LBR_INFO_MISPRED (1ull << 63)

/* The top bit of a virtual address: 56 with 5-level paging, 47 with 4-level paging. */
#define MSRH_VA_BITS (__VIRTUAL_MASK_SHIFT + 1)

static bool simulate_lbr;
module_param(simulate_lbr, bool, 0444);
MODULE_PARM_DESC(simulate_lbr,
		 "TEST ONLY, NEVER FOR PRODUCTION: skip the LBR probe, keep the MSRs in memory and fill snapshots with synthetic entries");

/*
 * TEST ONLY counters (simulate_lbr=1): target lookups made by the sched_switch hook and the
 * entries they visited, so the self-test can check that a switch costs O(1), not a list walk.
 */
static unsigned long sim_switch_lookups, sim_switch_visits;
module_param(sim_switch_lookups, ulong, 0444);
module_param(sim_switch_visits, ulong, 0444);

/* ---- CPU description (computed once at load) ------------------------------------------------ */

struct msrh_cpu {
	u32 vendor, family, model, stepping;
	u32 lbr_format, depth, from, to, info; /* MSR bases; 0 = absent */
	u32 features;
	bool intel;
	bool pt_coexist; /* perf lets PT and LBR run together on this model */
	const char *layout;
};
static struct msrh_cpu msrh_cpu;

static void msrh_detect_cpu(struct msrh_cpu *c)
{
	unsigned int eax, ebx, ecx, edx;
	u64 caps = 0;

	memset(c, 0, sizeof(*c));
	c->family = boot_cpu_data.x86;
	c->model = boot_cpu_data.x86_model;
	c->stepping = boot_cpu_data.x86_stepping;
	switch (boot_cpu_data.x86_vendor) {
	case X86_VENDOR_INTEL:
		c->vendor = MSRH_VENDOR_INTEL;
		c->intel = true;
		break;
	case X86_VENDOR_AMD:
		c->vendor = MSRH_VENDOR_AMD;
		break;
	case X86_VENDOR_HYGON:
		c->vendor = MSRH_VENDOR_HYGON;
		break;
	default:
		c->vendor = MSRH_VENDOR_UNKNOWN;
	}
	if (boot_cpu_has(X86_FEATURE_HYPERVISOR))
		c->features |= MSRH_FEAT_HYPERVISOR;
	c->layout = "none";
	if (!c->intel)
		return;

	cpuid(1, &eax, &ebx, &ecx, &edx);
	if (ecx & (1u << 15)) { /* PDCM */
		c->features |= MSRH_FEAT_PDCM;
		if (!msrh_rdmsr_safe(MSRH_MSR_PERF_CAPABILITIES, &caps))
			c->lbr_format = caps & 0x3f;
	}
	if (boot_cpu_data.cpuid_level >= 7) {
		cpuid_count(7, 0, &eax, &ebx, &ecx, &edx);
		if (edx & (1u << 19)) {
			c->features |= MSRH_FEAT_ARCH_LBR;
			c->layout = "arch-lbr (unsupported)";
			return;
		}
	}
	if (c->family != 6)
		return;
	{
		struct msrh_layout l = msrh_layout_for(c->model, c->lbr_format);

		c->depth = l.depth, c->from = l.from, c->to = l.to, c->info = l.info, c->layout = l.name;
		c->pt_coexist = msrh_lbr_pt_coexist(&l);
	}
	if (c->info)
		c->features |= MSRH_FEAT_LBR_INFO;
}

/* ---- MSR access (real, or the TEST ONLY simulation) ----------------------------------------- */

#define MSRH_SIM_DEPTH MSRH_SIM_COUNT
struct msrh_sim_regs {
	u64 debugctl, select, tos, rtit;
	u64 from[MSRH_SIM_DEPTH], to[MSRH_SIM_DEPTH], info[MSRH_SIM_DEPTH];
};
static DEFINE_PER_CPU(struct msrh_sim_regs, msrh_sim);

/* The simulated register `msr` of this CPU, NULL if it is not one. */
static u64 *msrh_sim_reg(u32 msr)
{
	struct msrh_sim_regs *r = this_cpu_ptr(&msrh_sim);

	switch (msr) {
	case MSRH_MSR_DEBUGCTL: return &r->debugctl;
	case MSRH_MSR_LBR_SELECT: return &r->select;
	case MSRH_MSR_LBR_TOS: return &r->tos;
	case MSRH_MSR_RTIT_CTL: return &r->rtit;
	}
	if (msr >= 0x680 && msr < 0x680 + MSRH_SIM_DEPTH)
		return &r->from[msr - 0x680];
	if (msr >= 0x6c0 && msr < 0x6c0 + MSRH_SIM_DEPTH)
		return &r->to[msr - 0x6c0];
	if (msr >= 0xdc0 && msr < 0xdc0 + MSRH_SIM_DEPTH)
		return &r->info[msr - 0xdc0];
	return NULL;
}

static int msrh_rd(u32 msr, u64 *v)
{
	if (simulate_lbr) {
		u64 *reg = msrh_sim_reg(msr);

		if (reg) {
			*v = *reg;
			return 0;
		}
	}
	return msrh_rdmsr_safe(msr, v); /* simulate_lbr: only reads (RDMSR ioctl) come here */
}

static int msrh_wr(u32 msr, u64 v)
{
	if (simulate_lbr) {
		u64 *reg = msrh_sim_reg(msr);

		if (!reg)
			return -EIO; /* never a real MSR in a test */
		*reg = v;
		return 0;
	}
	return msrh_wrmsr_safe(msr, v);
}

/*
 * TEST ONLY: what the CPU would do at a trap while the LBR is on: record the synthetic branches
 * the uapi header specifies (newest last), into this CPU's simulated stack.
 */
static void msrh_sim_record(u64 a)
{
	struct msrh_sim_regs *r = this_cpu_ptr(&msrh_sim);
	int k;

	if (!(r->debugctl & MSRH_DEBUGCTL_LBR))
		return;
	for (k = MSRH_SIM_COUNT - 1; k >= 0; k--) {
		r->tos = (r->tos + 1) % MSRH_SIM_DEPTH;
		r->from[r->tos] = a - 0x10ull * k - 0x20;
		r->to[r->tos] = a - 0x10ull * k;
		r->info[r->tos] = MSRH_SIM_INFO(k);
	}
}

/* TEST ONLY: at load, every CPU's stack holds someone else's branches (other tasks, the kernel). */
static void msrh_sim_init(void *unused)
{
	struct msrh_sim_regs *r = this_cpu_ptr(&msrh_sim);
	u32 i;

	memset(r, 0, sizeof(*r));
	for (i = 0; i < MSRH_SIM_DEPTH; i++) {
		r->from[i] = MSRH_SIM_FOREIGN + 0x100 * i;
		r->to[i] = MSRH_SIM_FOREIGN + 0x100 * i + 0x40;
	}
	r->tos = 3;
}

/*
 * Does DEBUGCTL.LBR (and LBR_SELECT) really stick?  QEMU TCG and KVM without a vPMU LBR accept
 * the write without #GP and drop it, and TCG reads unknown MSRs as 0, so a successful
 * rdmsr/wrmsr proves nothing: only reading the bit back does.  IRQs are off so that nothing
 * runs with the bit set, and the original value is always written back.
 */
static bool msrh_probe_lbr(u64 *orig_out, u64 *readback_out)
{
	unsigned long flags;
	u64 orig = 0, after = 0, sel = 0, sel_after = 0;
	bool lbr = false, select = false, tos = false;
	int r1, w1 = -1, r2 = -1;

	local_irq_save(flags);
	r1 = msrh_rdmsr_safe(MSRH_MSR_DEBUGCTL, &orig);
	if (!r1 && (orig & MSRH_DEBUGCTL_LBR)) {
		lbr = true; /* already on: someone else owns it; attach will say EBUSY */
		after = orig;
	} else if (!r1) {
		w1 = msrh_wrmsr_safe(MSRH_MSR_DEBUGCTL, orig | MSRH_DEBUGCTL_LBR);
		r2 = msrh_rdmsr_safe(MSRH_MSR_DEBUGCTL, &after);
		msrh_wrmsr_safe(MSRH_MSR_DEBUGCTL, orig);
		lbr = !w1 && !r2 && (after & MSRH_DEBUGCTL_LBR);
	}
	if (lbr && msrh_cpu.intel && !msrh_rdmsr_safe(MSRH_MSR_LBR_SELECT, &sel)) {
		if (sel) {
			select = true;
		} else if (!msrh_wrmsr_safe(MSRH_MSR_LBR_SELECT, MSRH_LBR_SELECT_USER)) {
			if (!msrh_rdmsr_safe(MSRH_MSR_LBR_SELECT, &sel_after))
				select = sel_after == MSRH_LBR_SELECT_USER;
			msrh_wrmsr_safe(MSRH_MSR_LBR_SELECT, sel);
		}
		tos = !msrh_rdmsr_safe(MSRH_MSR_LBR_TOS, &sel_after);
	}
	local_irq_restore(flags);

	*orig_out = orig;
	*readback_out = after;
	if (lbr)
		msrh_cpu.features |= MSRH_FEAT_LBR;
	if (select)
		msrh_cpu.features |= MSRH_FEAT_LBR_SELECT;
	if (tos)
		msrh_cpu.features |= MSRH_FEAT_LBR_TOS;
	return lbr;
}

/* ---- per-open and per-target state ---------------------------------------------------------- */

struct msrh_file {
	int unused;
};

struct msrh_target {
	struct list_head node;    /* on msrh_targets (writers, under msrh_lock) */
	struct hlist_node hnode;  /* in msrh_hash, keyed by task: what the hooks look up, RCU */
	struct rcu_head rcu;
	struct task_struct *task; /* reference held */
	struct msrh_file *owner;  /* the open file that attached it */
	raw_spinlock_t lock;      /* protects everything below */
	bool unlinked;            /* under msrh_lock */
	bool removed;
	bool trap_pending;        /* a trap snapshot was taken; keep it until resumed */
	bool stopped;             /* switched out in a ptrace stop (TASK_TRACED) */
	bool conflict;
	/* raw stack saved at switch-out, written back at switch-in (false: never switched out yet) */
	u64 raw_tos;
	u64 raw_from[MSRH_LBR_MAX], raw_to[MSRH_LBR_MAX], raw_info[MSRH_LBR_MAX];
	bool raw_valid;
	/* the published snapshot */
	u64 seq;
	u64 ip;
	u32 count, flags, cpu;
	struct msrh_lbr_entry entries[MSRH_LBR_MAX];
};

static LIST_HEAD(msrh_targets);
/*
 * The hooks run on every context switch of every CPU: they find a target by hashing the task
 * pointer (one short bucket), never by walking all targets.
 */
static DEFINE_HASHTABLE(msrh_hash, 8);
static DEFINE_RAW_SPINLOCK(msrh_lock); /* writers of msrh_targets and msrh_hash; readers use RCU */
static atomic_t msrh_nr_targets = ATOMIC_INIT(0);
static atomic_t msrh_nr_objects = ATOMIC_INIT(0); /* open files + targets not yet freed */
static atomic64_t msrh_seq = ATOMIC64_INIT(0);
/*
 * The task whose LBR is on on this CPU.  A task pointer, only ever compared, never
 * dereferenced: it stays meaningful even after the target entry is gone.
 */
static DEFINE_PER_CPU(struct task_struct *, msrh_cpu_owner);
/* LBR_SELECT as the module found it at switch-in (perf's stale filter): put back at switch-out. */
static DEFINE_PER_CPU(u64, msrh_cpu_foreign_select);

static struct msrh_target *msrh_find_rcu(struct task_struct *task)
{
	struct msrh_target *t;

	hash_for_each_possible_rcu(msrh_hash, t, hnode, (unsigned long)task)
		if (t->task == task)
			return t;
	return NULL;
}

/* The same, counting what it visits (TEST ONLY numbers for the self-test). */
static struct msrh_target *msrh_find_switch(struct task_struct *task)
{
	struct msrh_target *t;

	if (!simulate_lbr)
		return msrh_find_rcu(task);
	sim_switch_lookups++;
	hash_for_each_possible_rcu(msrh_hash, t, hnode, (unsigned long)task) {
		sim_switch_visits++;
		if (t->task == task)
			return t;
	}
	return NULL;
}

static void msrh_unlink(struct msrh_target *t) /* msrh_lock held */
{
	t->unlinked = true;
	list_del_rcu(&t->node);
	hash_del_rcu(&t->hnode);
	atomic_dec(&msrh_nr_targets);
}

/* Read this CPU's LBR stack into t->raw_* (IRQs off, LBR already frozen or filtered). */
static void msrh_read_raw(struct msrh_target *t)
{
	u32 depth = msrh_cpu.depth, i;
	u64 tos = 0;

	if (msrh_rd(MSRH_MSR_LBR_TOS, &tos))
		tos = 0;
	t->raw_tos = tos;
	for (i = 0; i < depth; i++) {
		t->raw_from[i] = t->raw_to[i] = t->raw_info[i] = 0;
		if (msrh_rd(msrh_cpu.from + i, &t->raw_from[i]))
			t->raw_from[i] = 0;
		if (msrh_rd(msrh_cpu.to + i, &t->raw_to[i]))
			t->raw_to[i] = 0;
		if (msrh_cpu.info && msrh_rd(msrh_cpu.info + i, &t->raw_info[i]))
			t->raw_info[i] = 0;
	}
	t->raw_valid = true;
}

/* Publish t->raw_* as the snapshot, newest first. Called with t->lock held. */
static void msrh_publish_raw(struct msrh_target *t, u32 why, u64 ip)
{
	u32 depth = msrh_cpu.depth, n = 0, i;

	for (i = 0; i < depth && n < MSRH_LBR_MAX; i++) {
		u32 idx = (u32)(t->raw_tos - i) % depth;
		u64 from = t->raw_from[idx], to = t->raw_to[idx], info = t->raw_info[idx];

		if (!from && !to)
			continue;
		/* formats 3/4 keep MISPRED in FROM bit 63: move it to the LBR_INFO position */
		if (!msrh_cpu.info && (msrh_cpu.lbr_format == 3 || msrh_cpu.lbr_format == 4))
			info = (from & MSRH_LBR_INFO_MISPRED);
		t->entries[n].from = msrh_canonical(from, MSRH_VA_BITS);
		t->entries[n].to = msrh_canonical(to, MSRH_VA_BITS);
		t->entries[n].info = info;
		n++;
	}
	t->count = n;
	t->flags = why | (t->conflict ? MSRH_SNAP_CONFLICT : 0) | (simulate_lbr ? MSRH_SNAP_SIMULATED : 0);
	t->ip = ip;
	t->cpu = smp_processor_id();
	t->seq = atomic64_inc_return(&msrh_seq);
}

/* Who else uses the LBR of this CPU (MSRH_BUSY_*; 0 = nobody). IRQs or preemption off. */
static unsigned msrh_busy_here(void)
{
	u64 dbg = 0, rtit = 0;

	if (msrh_rd(MSRH_MSR_DEBUGCTL, &dbg))
		return MSRH_BUSY_LBR; /* cannot even read it: do not touch it */
	if (msrh_rd(MSRH_MSR_RTIT_CTL, &rtit))
		rtit = 0; /* no PT on this CPU */
	return msrh_busy(dbg, rtit, msrh_cpu.pt_coexist);
}

/* Turn this CPU's LBR off if `task` (or any task of ours, NULL) owns it.  IRQs off. */
static void msrh_cpu_release(struct task_struct *task)
{
	struct task_struct *owner = this_cpu_read(msrh_cpu_owner);
	u64 dbg, sel;

	if (!owner || (task && owner != task))
		return;
	if (!msrh_rd(MSRH_MSR_DEBUGCTL, &dbg) && !msrh_rd(MSRH_MSR_LBR_SELECT, &sel) &&
	    msrh_still_ours(sel, dbg)) {
		msrh_wr(MSRH_MSR_DEBUGCTL, dbg & ~MSRH_DEBUGCTL_LBR);
		msrh_wr(MSRH_MSR_LBR_SELECT, this_cpu_read(msrh_cpu_foreign_select));
	}
	this_cpu_write(msrh_cpu_owner, NULL);
}

static void msrh_cpu_release_ipi(void *task)
{
	msrh_cpu_release(task);
}

/* ---- hooks ------------------------------------------------------------------------------------ */

static void msrh_switch_out(struct msrh_target *t, struct task_struct *prev)
{
	u64 ip = task_pt_regs(prev)->ip;

	raw_spin_lock(&t->lock);
	/*
	 * A trap snapshot stays until the thread is resumed from a ptrace stop: switch-outs
	 * between the trap and the stop (preemption on the way to ptrace_stop()) and the stop
	 * itself do not replace it.
	 */
	if (task_is_traced(prev))
		t->stopped = true;
	if (this_cpu_read(msrh_cpu_owner) == prev) {
		u64 dbg = 0, sel = 0;

		msrh_rd(MSRH_MSR_DEBUGCTL, &dbg);
		msrh_rd(MSRH_MSR_LBR_SELECT, &sel);
		if (msrh_still_ours(sel, dbg)) {
			/* freeze first, then read: nothing after this point can enter the stack */
			msrh_wr(MSRH_MSR_DEBUGCTL, dbg & ~MSRH_DEBUGCTL_LBR);
			msrh_read_raw(t);
			msrh_wr(MSRH_MSR_LBR_SELECT, this_cpu_read(msrh_cpu_foreign_select));
		} else {
			/* perf took the LBR while the thread ran: the stack is not the thread's */
			t->conflict = true;
		}
		this_cpu_write(msrh_cpu_owner, NULL);
		if (!t->removed && !t->trap_pending && t->raw_valid && !t->conflict)
			msrh_publish_raw(t, MSRH_SNAP_SWITCH, ip);
	}
	if (t->conflict && !t->removed && !t->trap_pending) {
		/* another user held the LBR: say so, with no entries, rather than nothing */
		t->count = 0;
		t->flags = MSRH_SNAP_SWITCH | MSRH_SNAP_CONFLICT | (simulate_lbr ? MSRH_SNAP_SIMULATED : 0);
		t->ip = ip;
		t->cpu = smp_processor_id();
		t->seq = atomic64_inc_return(&msrh_seq);
	}
	raw_spin_unlock(&t->lock);
}

static void msrh_switch_in(struct msrh_target *t, struct task_struct *next)
{
	u64 dbg = 0, sel = 0;
	u32 i;

	raw_spin_lock(&t->lock);
	if (t->stopped) { /* resumed by the tracer: the next stop needs a new snapshot */
		t->stopped = false;
		t->trap_pending = false;
	}
	if (t->removed)
		goto out;
	if (this_cpu_read(msrh_cpu_owner) || msrh_busy_here() || msrh_rd(MSRH_MSR_DEBUGCTL, &dbg) ||
	    msrh_rd(MSRH_MSR_LBR_SELECT, &sel)) {
		t->conflict = true; /* someone else (perf, a hypervisor) uses the LBR here */
		goto out;
	}
	t->conflict = false;
	/*
	 * The thread's own stack goes back in; the first time there is none yet, and the stack
	 * holds whatever ran here before (other tasks, the kernel): it is cleared.
	 */
	for (i = 0; i < msrh_cpu.depth; i++) {
		u64 from = t->raw_valid ? t->raw_from[i] : 0, to = t->raw_valid ? t->raw_to[i] : 0;
		u64 info = t->raw_valid ? t->raw_info[i] : 0;

		if (msrh_wr(msrh_cpu.from + i, from))
			msrh_wr(msrh_cpu.from + i, 0);
		if (msrh_wr(msrh_cpu.to + i, to))
			msrh_wr(msrh_cpu.to + i, 0);
		if (msrh_cpu.info && msrh_wr(msrh_cpu.info + i, info))
			msrh_wr(msrh_cpu.info + i, 0);
	}
	msrh_wr(MSRH_MSR_LBR_TOS, t->raw_valid ? t->raw_tos : 0);
	this_cpu_write(msrh_cpu_foreign_select, sel); /* perf's stale filter, put back at switch-out */
	if (msrh_wr(MSRH_MSR_LBR_SELECT, MSRH_LBR_SELECT_USER) ||
	    msrh_wr(MSRH_MSR_DEBUGCTL, dbg | MSRH_DEBUGCTL_LBR)) {
		msrh_wr(MSRH_MSR_LBR_SELECT, sel);
		t->conflict = true;
		goto out;
	}
	this_cpu_write(msrh_cpu_owner, next);
out:
	raw_spin_unlock(&t->lock);
}

static void msrh_probe_switch(MSRH_SWITCH_PROTO)
{
	struct task_struct *owner = this_cpu_read(msrh_cpu_owner);
	struct msrh_target *t;

	if (likely(!atomic_read(&msrh_nr_targets) && !owner))
		return;
	rcu_read_lock();
	t = msrh_find_switch(prev);
	if (t)
		msrh_switch_out(t, prev);
	else if (owner == prev)
		msrh_cpu_release(prev); /* detached or exited while running: just stop */
	t = msrh_find_switch(next);
	if (t)
		msrh_switch_in(t, next);
	rcu_read_unlock();
}

static void msrh_remove(struct msrh_target *t, bool all_cpus);

static void msrh_probe_exit(MSRH_EXIT_PROTO)
{
	struct msrh_target *t;
	unsigned long flags;
	bool mine = false;

	if (likely(!atomic_read(&msrh_nr_targets)))
		return;
	rcu_read_lock();
	t = msrh_find_rcu(p);
	if (t) {
		raw_spin_lock_irqsave(&msrh_lock, flags);
		if (!t->unlinked) {
			msrh_unlink(t);
			mine = true;
		}
		raw_spin_unlock_irqrestore(&msrh_lock, flags);
	}
	rcu_read_unlock();
	if (mine)
		msrh_remove(t, false); /* p == current: its LBR can only be on this CPU */
}

/* Snapshot in the target's own user int3/#DB path, before anything else runs. */
static int msrh_die_notify(struct notifier_block *nb, unsigned long val, void *data)
{
	struct die_args *args = data;
	struct msrh_target *t;
	unsigned long flags;
	u32 why;

	if (val == DIE_INT3)
		why = MSRH_SNAP_INT3;
	else if (val == DIE_DEBUG)
		why = MSRH_SNAP_DEBUG;
	else
		return NOTIFY_DONE;
	if (!args || !args->regs || !user_mode(args->regs) || !atomic_read(&msrh_nr_targets))
		return NOTIFY_DONE;

	rcu_read_lock();
	t = msrh_find_rcu(current);
	if (t) {
		raw_spin_lock_irqsave(&t->lock, flags);
		if (!t->removed && this_cpu_read(msrh_cpu_owner) == current) {
			if (simulate_lbr) /* what the CPU would have recorded up to this trap */
				msrh_sim_record(why == MSRH_SNAP_INT3 ? args->regs->ip - 1 : args->regs->ip);
			/*
			 * LBR_SELECT keeps ring-0 branches out, so the stack still ends with the
			 * thread's last user branches.  (A #DB also clears DEBUGCTL.LBR on Intel,
			 * which freezes the stack; it is set again at the next switch-in.)
			 */
			msrh_read_raw(t);
			msrh_publish_raw(t, why, args->regs->ip);
			t->trap_pending = true;
		}
		raw_spin_unlock_irqrestore(&t->lock, flags);
	}
	rcu_read_unlock();
	return NOTIFY_DONE;
}

static struct notifier_block msrh_die_nb = {
	.notifier_call = msrh_die_notify,
};

/* ---- target lifetime -------------------------------------------------------------------------- */

static void msrh_target_free_rcu(struct rcu_head *head)
{
	struct msrh_target *t = container_of(head, struct msrh_target, rcu);

	put_task_struct(t->task);
	kfree(t);
	atomic_dec(&msrh_nr_objects);
}

/*
 * Second half of removal, after the target was unlinked from msrh_targets (by the caller,
 * under msrh_lock).  all_cpus: process context, turn the LBR off wherever the target may be
 * running; else (exit path) the target is current and only this CPU can have it.
 */
static void msrh_remove(struct msrh_target *t, bool all_cpus)
{
	unsigned long flags;

	raw_spin_lock_irqsave(&t->lock, flags);
	t->removed = true;
	raw_spin_unlock_irqrestore(&t->lock, flags);
	if (all_cpus) {
		on_each_cpu(msrh_cpu_release_ipi, t->task, 1);
	} else {
		local_irq_save(flags);
		msrh_cpu_release(t->task);
		local_irq_restore(flags);
	}
	call_rcu(&t->rcu, msrh_target_free_rcu);
}

/* Unlink every target owned by `owner` (NULL = all) and free them. Process context. */
static void msrh_remove_owned(struct msrh_file *owner)
{
	struct msrh_target *t, *tmp;

	/* one at a time: msrh_remove() sends IPIs, which needs IRQs on */
	for (;;) {
		struct msrh_target *victim = NULL;

		raw_spin_lock_irq(&msrh_lock);
		list_for_each_entry_safe(t, tmp, &msrh_targets, node) {
			if (!owner || t->owner == owner) {
				victim = t;
				msrh_unlink(victim);
				break;
			}
		}
		raw_spin_unlock_irq(&msrh_lock);
		if (!victim)
			break;
		msrh_remove(victim, true);
	}
}

/* ---- permission checks ------------------------------------------------------------------------ */

/* The target thread `pid`, if the caller is its current ptracer.  Reference returned. */
static struct task_struct *msrh_get_traced(pid_t pid, int *err)
{
	struct task_struct *task;

	if (pid <= 0) {
		*err = -EINVAL;
		return NULL;
	}
	rcu_read_lock();
	task = pid_task(find_vpid(pid), PIDTYPE_PID);
	if (!task || task->exit_state || (task->flags & PF_EXITING)) {
		rcu_read_unlock();
		*err = -ESRCH;
		return NULL;
	}
	if (!task->ptrace || ptrace_parent(task) != current) {
		rcu_read_unlock();
		*err = -EPERM;
		return NULL;
	}
	get_task_struct(task);
	rcu_read_unlock();
	return task;
}

/* ---- ioctls ----------------------------------------------------------------------------------- */

static long msrh_ioc_info(void __user *arg)
{
	struct msrh_info info;

	if (copy_from_user(&info, arg, sizeof(info)))
		return -EFAULT;
	if (info.size != sizeof(info))
		return -EINVAL;
	rcu_barrier(); /* let queued frees run, so live_objects is exact */
	memset(&info, 0, sizeof(info));
	info.size = sizeof(info);
	info.abi_version = MSRH_ABI_VERSION;
	info.vendor = msrh_cpu.vendor;
	info.family = msrh_cpu.family;
	info.model = msrh_cpu.model;
	info.stepping = msrh_cpu.stepping;
	info.lbr_format = msrh_cpu.lbr_format;
	info.features = msrh_cpu.features;
	if (simulate_lbr)
		info.features |= MSRH_FEAT_SIMULATED;
	info.lbr_depth = msrh_cpu.depth;
	info.lbr_from_msr = msrh_cpu.from;
	info.lbr_to_msr = msrh_cpu.to;
	info.lbr_info_msr = msrh_cpu.info;
	if (security_locked_down(LOCKDOWN_MSR))
		info.features |= MSRH_FEAT_LOCKDOWN;
	info.live_targets = atomic_read(&msrh_nr_targets);
	info.live_objects = atomic_read(&msrh_nr_objects);
	return copy_to_user(arg, &info, sizeof(info)) ? -EFAULT : 0;
}

static int msrh_copy_target(struct msrh_lbr_target *a, void __user *arg)
{
	if (copy_from_user(a, arg, sizeof(*a)))
		return -EFAULT;
	if (a->size != sizeof(*a) || a->flags || a->reserved)
		return -EINVAL;
	return 0;
}

/* Is the LBR of this CPU free?  (msrh_busy(): another LBR, BTS or PT user means no.) */
static int msrh_lbr_free_here(void)
{
	unsigned busy;

	preempt_disable();
	busy = msrh_busy_here();
	preempt_enable();
	return busy ? -EBUSY : 0;
}

static long msrh_ioc_attach(struct msrh_file *f, void __user *arg)
{
	struct msrh_lbr_target a;
	struct task_struct *task;
	struct msrh_target *t;
	int err;

	err = msrh_copy_target(&a, arg);
	if (err)
		return err;
	/* attach programs LBR MSRs: refuse under lockdown, like the msr driver refuses writes */
	err = security_locked_down(LOCKDOWN_MSR);
	if (err)
		return err;
	task = msrh_get_traced(a.pid, &err);
	if (!task)
		return err;
	err = msrh_lbr_free_here();
	if (err)
		goto out_put;
	t = kzalloc(sizeof(*t), GFP_KERNEL);
	if (!t) {
		err = -ENOMEM;
		goto out_put;
	}
	atomic_inc(&msrh_nr_objects);
	raw_spin_lock_init(&t->lock);
	t->task = task; /* the reference moves to t */
	t->owner = f;

	raw_spin_lock_irq(&msrh_lock);
	rcu_read_lock();
	if (msrh_find_rcu(task)) {
		err = -EEXIST;
	} else {
		list_add_rcu(&t->node, &msrh_targets);
		hash_add_rcu(msrh_hash, &t->hnode, (unsigned long)task);
		atomic_inc(&msrh_nr_targets);
	}
	rcu_read_unlock();
	raw_spin_unlock_irq(&msrh_lock);
	if (err) {
		kfree(t);
		atomic_dec(&msrh_nr_objects);
		goto out_put;
	}
	return 0;
out_put:
	put_task_struct(task);
	return err;
}

/* The target entry of `task` owned by `f`; caller holds rcu_read_lock(). */
static struct msrh_target *msrh_lookup(struct msrh_file *f, struct task_struct *task, int *err)
{
	struct msrh_target *t = msrh_find_rcu(task);

	if (!t || t->owner != f) {
		*err = -ENOENT; /* not attached through this file */
		return NULL;
	}
	return t;
}

static long msrh_ioc_detach(struct msrh_file *f, void __user *arg)
{
	struct msrh_lbr_target a;
	struct task_struct *task;
	struct msrh_target *t;
	bool mine = false;
	int err;

	err = msrh_copy_target(&a, arg);
	if (err)
		return err;
	task = msrh_get_traced(a.pid, &err);
	if (!task)
		return err;
	rcu_read_lock();
	t = msrh_lookup(f, task, &err);
	if (t) {
		raw_spin_lock_irq(&msrh_lock);
		if (!t->unlinked) {
			msrh_unlink(t);
			mine = true;
		}
		raw_spin_unlock_irq(&msrh_lock);
	}
	rcu_read_unlock();
	put_task_struct(task);
	if (!t)
		return err;
	if (!mine)
		return -ENOENT;
	msrh_remove(t, true);
	return 0;
}

static long msrh_ioc_snapshot(struct msrh_file *f, void __user *arg)
{
	struct msrh_lbr_snapshot *s;
	struct task_struct *task;
	struct msrh_target *t;
	unsigned long flags;
	s32 pid;
	u32 size, res0;
	int err = 0;

	if (get_user(size, (u32 __user *)arg) ||
	    get_user(pid, (s32 __user *)((char __user *)arg + offsetof(struct msrh_lbr_snapshot, pid))) ||
	    get_user(res0, (u32 __user *)((char __user *)arg +
					  offsetof(struct msrh_lbr_snapshot, reserved0))))
		return -EFAULT;
	if (size != sizeof(*s) || res0)
		return -EINVAL;
	task = msrh_get_traced(pid, &err);
	if (!task)
		return err;
	s = kzalloc(sizeof(*s), GFP_KERNEL);
	if (!s) {
		put_task_struct(task);
		return -ENOMEM;
	}
	s->size = sizeof(*s);
	s->pid = pid;
	rcu_read_lock();
	t = msrh_lookup(f, task, &err);
	if (t) {
		raw_spin_lock_irqsave(&t->lock, flags);
		if (t->removed) {
			err = -ESRCH;
		} else {
			s->count = t->count;
			s->flags = t->flags;
			s->seq = t->seq;
			s->ip = t->ip;
			s->cpu = t->cpu;
			memcpy(s->entries, t->entries, sizeof(s->entries));
		}
		raw_spin_unlock_irqrestore(&t->lock, flags);
	}
	rcu_read_unlock();
	put_task_struct(task);
	if (!err && copy_to_user(arg, s, sizeof(*s)))
		err = -EFAULT;
	kfree(s);
	return err;
}

static bool msrh_rdmsr_allowed(u32 msr)
{
	const struct msrh_cpu *c = &msrh_cpu;

	if (msr == MSRH_MSR_DEBUGCTL)
		return true;
	if (!c->intel)
		return false;
	if (msr == MSRH_MSR_LBR_SELECT || msr == MSRH_MSR_LBR_TOS || msr == MSRH_MSR_MISC_ENABLE)
		return true;
	if (msr == MSRH_MSR_PERF_CAPABILITIES)
		return c->features & MSRH_FEAT_PDCM;
	if (c->depth && msr >= c->from && msr < c->from + c->depth)
		return true;
	if (c->depth && msr >= c->to && msr < c->to + c->depth)
		return true;
	if (c->info && msr >= c->info && msr < c->info + c->depth)
		return true;
	return false;
}

static long msrh_ioc_rdmsr(void __user *arg)
{
	struct msrh_rdmsr r;
	u64 v = 0;
	int err;

	if (copy_from_user(&r, arg, sizeof(r)))
		return -EFAULT;
	if (r.size != sizeof(r) || r.reserved)
		return -EINVAL;
	if (!msrh_rdmsr_allowed(r.msr))
		return -EPERM;
	preempt_disable();
	err = msrh_rd(r.msr, &v);
	r.cpu = smp_processor_id();
	preempt_enable();
	if (err)
		return -EIO;
	r.value = v;
	return copy_to_user(arg, &r, sizeof(r)) ? -EFAULT : 0;
}

/* TEST ONLY: play another LBR/BTS/PT user by setting a simulated register on every CPU. */
struct msrh_sim_set {
	u32 msr;
	u64 value;
};

static void msrh_sim_set_ipi(void *arg)
{
	struct msrh_sim_set *set = arg;
	u64 *reg = msrh_sim_reg(set->msr);

	if (reg)
		*reg = set->value;
}

static long msrh_ioc_sim_set(void __user *arg)
{
	struct msrh_rdmsr r;
	struct msrh_sim_set set;

	if (!simulate_lbr)
		return -ENOTTY; /* real MSRs are never written on a caller's behalf */
	if (copy_from_user(&r, arg, sizeof(r)))
		return -EFAULT;
	if (r.size != sizeof(r) || r.reserved)
		return -EINVAL;
	if (r.msr != MSRH_MSR_DEBUGCTL && r.msr != MSRH_MSR_LBR_SELECT && r.msr != MSRH_MSR_LBR_TOS &&
	    r.msr != MSRH_MSR_RTIT_CTL)
		return -EPERM;
	set.msr = r.msr;
	set.value = r.value;
	on_each_cpu(msrh_sim_set_ipi, &set, 1);
	return 0;
}

static long msrh_ioctl(struct file *file, unsigned int cmd, unsigned long uarg)
{
	struct msrh_file *f = file->private_data;
	void __user *arg = (void __user *)uarg;

	switch (cmd) {
	case MSRH_IOC_INFO:
		return msrh_ioc_info(arg);
	case MSRH_IOC_LBR_ATTACH:
		return msrh_ioc_attach(f, arg);
	case MSRH_IOC_LBR_DETACH:
		return msrh_ioc_detach(f, arg);
	case MSRH_IOC_LBR_SNAPSHOT:
		return msrh_ioc_snapshot(f, arg);
	case MSRH_IOC_RDMSR:
		return msrh_ioc_rdmsr(arg);
	case MSRH_IOC_SIM_SET:
		return msrh_ioc_sim_set(arg);
	default:
		return -ENOTTY;
	}
}

static int msrh_open(struct inode *inode, struct file *file)
{
	struct msrh_file *f;

	if (!capable(CAP_SYS_RAWIO))
		return -EPERM;
	f = kzalloc(sizeof(*f), GFP_KERNEL);
	if (!f)
		return -ENOMEM;
	atomic_inc(&msrh_nr_objects);
	file->private_data = f;
	return nonseekable_open(inode, file);
}

static int msrh_release(struct inode *inode, struct file *file)
{
	struct msrh_file *f = file->private_data;

	msrh_remove_owned(f);
	kfree(f);
	atomic_dec(&msrh_nr_objects);
	return 0;
}

static const struct file_operations msrh_fops = {
	.owner = THIS_MODULE,
	.open = msrh_open,
	.release = msrh_release,
	.unlocked_ioctl = msrh_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

static struct miscdevice msrh_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = MSRH_DEVICE_NAME,
	.fops = &msrh_fops,
	.mode = 0600,
};

/* ---- load / unload ---------------------------------------------------------------------------- */

static struct tracepoint *msrh_tp_switch, *msrh_tp_exit;

static void msrh_find_tp(struct tracepoint *tp, void *priv)
{
	if (!strcmp(tp->name, "sched_switch"))
		msrh_tp_switch = tp;
	else if (!strcmp(tp->name, "sched_process_exit"))
		msrh_tp_exit = tp;
}

static const char *msrh_vendor_name(u32 v)
{
	switch (v) {
	case MSRH_VENDOR_INTEL: return "Intel";
	case MSRH_VENDOR_AMD: return "AMD";
	case MSRH_VENDOR_HYGON: return "Hygon";
	default: return "unknown-vendor";
	}
}

static int __init msrh_init(void)
{
	u64 orig = 0, readback = 0;
	int err;

	msrh_detect_cpu(&msrh_cpu);
	pr_info("%s family %#x model %#x stepping %u%s, LBR format %u, layout %s depth %u\n",
		msrh_vendor_name(msrh_cpu.vendor), msrh_cpu.family, msrh_cpu.model,
		msrh_cpu.stepping, (msrh_cpu.features & MSRH_FEAT_HYPERVISOR) ? " (hypervisor)" : "",
		msrh_cpu.lbr_format, msrh_cpu.layout, msrh_cpu.depth);

	if (simulate_lbr) {
		pr_warn("************************************************************\n");
		pr_warn("simulate_lbr=1: TEST ONLY, NEVER FOR PRODUCTION. The LBR probe is\n");
		pr_warn("skipped, the MSRs are simulated in memory and every snapshot is\n");
		pr_warn("SYNTHETIC (not real branches).\n");
		pr_warn("************************************************************\n");
		add_taint(TAINT_USER, LOCKDEP_STILL_OK);
		/* a 16-deep Skylake-like stack (with LBR_INFO), simulated per CPU */
		msrh_cpu.depth = MSRH_SIM_DEPTH, msrh_cpu.from = 0x680, msrh_cpu.to = 0x6c0;
		msrh_cpu.info = 0xdc0, msrh_cpu.lbr_format = 5, msrh_cpu.pt_coexist = true;
		msrh_cpu.layout = "simulated";
		msrh_cpu.features |= MSRH_FEAT_LBR | MSRH_FEAT_LBR_SELECT | MSRH_FEAT_LBR_TOS | MSRH_FEAT_LBR_INFO;
		on_each_cpu(msrh_sim_init, NULL, 1);
	} else {
		if (!msrh_probe_lbr(&orig, &readback)) {
			pr_err("refusing to load (-ENODEV): DEBUGCTL.LBR did not stick in the write-and-read-back probe (before %#llx, read back %#llx): this CPU or hypervisor does not honour LBR (QEMU TCG and KVM without vPMU LBR drop it silently)\n",
			       orig, readback);
			return -ENODEV;
		}
		if (msrh_cpu.features & MSRH_FEAT_ARCH_LBR) {
			pr_err("refusing to load (-ENODEV): this CPU has architectural LBR, which ABI v%u does not drive\n",
			       MSRH_ABI_VERSION);
			return -ENODEV;
		}
		if (!msrh_cpu.depth || !(msrh_cpu.features & MSRH_FEAT_LBR_SELECT)) {
			pr_err("refusing to load (-ENODEV): no supported model-specific LBR stack with LBR_SELECT on %s family %#x model %#x\n",
			       msrh_vendor_name(msrh_cpu.vendor), msrh_cpu.family, msrh_cpu.model);
			return -ENODEV;
		}
		pr_info("LBR probe passed: DEBUGCTL.LBR and LBR_SELECT stick, %u entries at FROM %#x TO %#x INFO %#x\n",
			msrh_cpu.depth, msrh_cpu.from, msrh_cpu.to, msrh_cpu.info);
	}

	for_each_kernel_tracepoint(msrh_find_tp, NULL);
	if (!msrh_tp_switch || !msrh_tp_exit) {
		pr_err("refusing to load (-ENODEV): tracepoint sched_switch or sched_process_exit not found\n");
		return -ENODEV;
	}
	err = tracepoint_probe_register(msrh_tp_switch, (void *)msrh_probe_switch, NULL);
	if (err)
		goto fail;
	err = tracepoint_probe_register(msrh_tp_exit, (void *)msrh_probe_exit, NULL);
	if (err)
		goto fail_switch;
	err = register_die_notifier(&msrh_die_nb);
	if (err)
		goto fail_exit;
	err = misc_register(&msrh_misc);
	if (err)
		goto fail_die;
	pr_info("loaded: /dev/%s, ABI v%u%s\n", MSRH_DEVICE_NAME, MSRH_ABI_VERSION,
		simulate_lbr ? ", SIMULATED LBR (TEST ONLY)" : "");
	return 0;

fail_die:
	unregister_die_notifier(&msrh_die_nb);
fail_exit:
	tracepoint_probe_unregister(msrh_tp_exit, (void *)msrh_probe_exit, NULL);
fail_switch:
	tracepoint_probe_unregister(msrh_tp_switch, (void *)msrh_probe_switch, NULL);
fail:
	tracepoint_synchronize_unregister();
	pr_err("hook registration failed: %d\n", err);
	return err;
}

static void __exit msrh_exit(void)
{
	misc_deregister(&msrh_misc); /* no open file can remain: each holds a module reference */
	unregister_die_notifier(&msrh_die_nb);
	tracepoint_probe_unregister(msrh_tp_exit, (void *)msrh_probe_exit, NULL);
	tracepoint_probe_unregister(msrh_tp_switch, (void *)msrh_probe_switch, NULL);
	tracepoint_synchronize_unregister();
	msrh_remove_owned(NULL);
	on_each_cpu(msrh_cpu_release_ipi, NULL, 1);
	rcu_barrier(); /* every call_rcu free has run */
	pr_info("unloaded: %d object(s) outstanding\n", atomic_read(&msrh_nr_objects));
}

module_init(msrh_init);
module_exit(msrh_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("LBR snapshots at ptrace stops for branchstub (read-only MSR access)");
MODULE_VERSION("1");
