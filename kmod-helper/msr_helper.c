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
 * simulate_lbr=1 is TEST ONLY: no MSR is touched and snapshots are synthetic, so that the
 * plumbing (hooks, permissions, lifetime) can be tested where no LBR exists (QEMU TCG).
 */
#define pr_fmt(fmt) "msr_helper: " fmt

#include <linux/capability.h>
#include <linux/fs.h>
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

#define MSRH_DEBUGCTL_LBR (1ull << 0)
#define MSRH_LBR_SELECT_CPL_EQ_0 (1ull << 0)  /* suppress branches that end in ring 0 */
#define MSRH_LBR_SELECT_FAR_BRANCH (1ull << 8) /* suppress far branches (syscall/irq/iret) */
#define MSRH_LBR_SELECT_USER (MSRH_LBR_SELECT_CPL_EQ_0 | MSRH_LBR_SELECT_FAR_BRANCH)
#define MSRH_LBR_INFO_MISPRED (1ull << 63)

static bool simulate_lbr;
module_param(simulate_lbr, bool, 0444);
MODULE_PARM_DESC(simulate_lbr,
		 "TEST ONLY, NEVER FOR PRODUCTION: skip the LBR probe and fill snapshots with synthetic entries");

/* ---- CPU description (computed once at load) ------------------------------------------------ */

struct msrh_cpu {
	u32 vendor, family, model, stepping;
	u32 lbr_format, depth, from, to, info; /* MSR bases; 0 = absent */
	u32 features;
	bool intel;
	const char *layout;
};
static struct msrh_cpu msrh_cpu;

static const u8 msrh_models_skl32[] = { /* Skylake and later (non-arch LBR), Goldmont, Tremont */
	0x4e, 0x5e, 0x55, 0x8e, 0x9e, 0x66, 0x6a, 0x6c, 0x7d, 0x7e, 0xa5, 0xa6,
	0x8c, 0x8d, 0xa7, 0x5c, 0x5f, 0x7a, 0x86, 0x96, 0x9c,
};
static const u8 msrh_models_nhm16[] = { /* Nehalem .. Broadwell */
	0x1a, 0x1e, 0x1f, 0x2e, 0x25, 0x2c, 0x2f, 0x2a, 0x2d, 0x3a, 0x3e, 0x3c, 0x3f,
	0x45, 0x46, 0x3d, 0x47, 0x4f, 0x56,
};
static const u8 msrh_models_atom8[] = { /* Bonnell, Saltwell, Silvermont, Airmont, KNL/KNM */
	0x1c, 0x26, 0x27, 0x35, 0x36, 0x37, 0x4d, 0x4a, 0x5a, 0x5d, 0x4c, 0x57, 0x85,
};
static const u8 msrh_models_core2[] = { 0x0f, 0x16, 0x17, 0x1d };

static bool msrh_model_in(u32 model, const u8 *list, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (list[i] == model)
			return true;
	return false;
}

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
	if (msrh_model_in(c->model, msrh_models_skl32, ARRAY_SIZE(msrh_models_skl32)) ||
	    (c->lbr_format >= 5 && c->lbr_format != 0x3f &&
	     !msrh_model_in(c->model, msrh_models_nhm16, ARRAY_SIZE(msrh_models_nhm16)))) {
		c->depth = 32, c->from = 0x680, c->to = 0x6c0, c->layout = "skylake";
	} else if (msrh_model_in(c->model, msrh_models_nhm16, ARRAY_SIZE(msrh_models_nhm16))) {
		c->depth = 16, c->from = 0x680, c->to = 0x6c0, c->layout = "nehalem";
	} else if (msrh_model_in(c->model, msrh_models_atom8, ARRAY_SIZE(msrh_models_atom8))) {
		c->depth = 8, c->from = 0x40, c->to = 0x60, c->layout = "atom";
	} else if (msrh_model_in(c->model, msrh_models_core2, ARRAY_SIZE(msrh_models_core2))) {
		c->depth = 4, c->from = 0x40, c->to = 0x60, c->layout = "core2";
	}
	if (c->depth == 32 && (c->lbr_format == 5 || c->lbr_format == 7)) {
		c->info = 0xdc0;
		c->features |= MSRH_FEAT_LBR_INFO;
	}
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
	struct list_head node;    /* on msrh_targets, RCU */
	struct rcu_head rcu;
	struct task_struct *task; /* reference held */
	struct msrh_file *owner;  /* the open file that attached it */
	raw_spinlock_t lock;      /* protects everything below */
	bool unlinked;            /* under msrh_lock */
	bool removed;
	bool trap_pending;        /* a trap snapshot was taken; keep it until resumed */
	bool stopped;             /* switched out in a ptrace stop (TASK_TRACED) */
	bool conflict;
	/* raw stack saved at switch-out, written back at switch-in (real LBR only) */
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
static DEFINE_RAW_SPINLOCK(msrh_lock); /* writers of msrh_targets; readers use RCU */
static atomic_t msrh_nr_targets = ATOMIC_INIT(0);
static atomic_t msrh_nr_objects = ATOMIC_INIT(0); /* open files + targets not yet freed */
static atomic64_t msrh_seq = ATOMIC64_INIT(0);
/*
 * The task whose LBR is on on this CPU.  A task pointer, only ever compared, never
 * dereferenced: it stays meaningful even after the target entry is gone.
 */
static DEFINE_PER_CPU(struct task_struct *, msrh_cpu_owner);

static struct msrh_target *msrh_find_rcu(struct task_struct *task)
{
	struct msrh_target *t;

	list_for_each_entry_rcu(t, &msrh_targets, node)
		if (t->task == task)
			return t;
	return NULL;
}

static u64 msrh_canonical(u64 v)
{
	return (u64)(((s64)(v << 16)) >> 16);
}

/* Read this CPU's LBR stack into t->raw_* (IRQs off, LBR already frozen or filtered). */
static void msrh_read_raw(struct msrh_target *t)
{
	u32 depth = msrh_cpu.depth, i;
	u64 tos = 0;

	if (msrh_rdmsr_safe(MSRH_MSR_LBR_TOS, &tos))
		tos = 0;
	t->raw_tos = tos;
	for (i = 0; i < depth; i++) {
		t->raw_from[i] = t->raw_to[i] = t->raw_info[i] = 0;
		if (msrh_rdmsr_safe(msrh_cpu.from + i, &t->raw_from[i]))
			t->raw_from[i] = 0;
		if (msrh_rdmsr_safe(msrh_cpu.to + i, &t->raw_to[i]))
			t->raw_to[i] = 0;
		if (msrh_cpu.info && msrh_rdmsr_safe(msrh_cpu.info + i, &t->raw_info[i]))
			t->raw_info[i] = 0;
	}
	t->raw_valid = true;
}

/* Publish t->raw_* as the snapshot, newest first. Called with t->lock held. */
static void msrh_publish_raw(struct msrh_target *t, u32 why, u64 ip)
{
	u32 depth = msrh_cpu.depth, n = 0, i;

	for (i = 0; i < depth && n < MSRH_LBR_MAX; i++) {
		u32 idx = (u32)(t->raw_tos - i) & (depth - 1);
		u64 from = t->raw_from[idx], to = t->raw_to[idx], info = t->raw_info[idx];

		if (!from && !to)
			continue;
		/* formats 3/4 keep MISPRED in FROM bit 63: move it to the LBR_INFO position */
		if (!msrh_cpu.info && (msrh_cpu.lbr_format == 3 || msrh_cpu.lbr_format == 4))
			info = (from & MSRH_LBR_INFO_MISPRED);
		t->entries[n].from = msrh_canonical(from);
		t->entries[n].to = msrh_canonical(to);
		t->entries[n].info = info;
		n++;
	}
	t->count = n;
	t->flags = why | (t->conflict ? MSRH_SNAP_CONFLICT : 0);
	t->ip = ip;
	t->cpu = smp_processor_id();
	t->seq = atomic64_inc_return(&msrh_seq);
}

/* TEST ONLY: deterministic synthetic entries (see the uapi header). t->lock held. */
static void msrh_publish_sim(struct msrh_target *t, u32 why, u64 ip)
{
	u64 a = (why & MSRH_SNAP_INT3) ? ip - 1 : ip;
	u32 k;

	memset(t->entries, 0, sizeof(t->entries));
	for (k = 0; k < MSRH_SIM_COUNT; k++) {
		t->entries[k].to = a - 0x10ull * k;
		t->entries[k].from = a - 0x10ull * k - 0x20;
		t->entries[k].info = MSRH_SIM_INFO(k);
	}
	t->count = MSRH_SIM_COUNT;
	t->flags = why | MSRH_SNAP_SIMULATED;
	t->ip = ip;
	t->cpu = smp_processor_id();
	t->seq = atomic64_inc_return(&msrh_seq);
}

/* Turn this CPU's LBR off if `task` (or any task of ours, NULL) owns it.  IRQs off. */
static void msrh_cpu_release(struct task_struct *task)
{
	struct task_struct *owner = this_cpu_read(msrh_cpu_owner);
	u64 dbg;

	if (!owner || (task && owner != task))
		return;
	if (!msrh_rdmsr_safe(MSRH_MSR_DEBUGCTL, &dbg))
		msrh_wrmsr_safe(MSRH_MSR_DEBUGCTL, dbg & ~MSRH_DEBUGCTL_LBR);
	msrh_wrmsr_safe(MSRH_MSR_LBR_SELECT, 0);
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
	if (simulate_lbr) {
		if (!t->removed && !t->trap_pending)
			msrh_publish_sim(t, MSRH_SNAP_SWITCH, ip);
	} else if (this_cpu_read(msrh_cpu_owner) == prev) {
		u64 dbg;

		/* freeze first, then read: nothing after this point can enter the stack */
		if (!msrh_rdmsr_safe(MSRH_MSR_DEBUGCTL, &dbg))
			msrh_wrmsr_safe(MSRH_MSR_DEBUGCTL, dbg & ~MSRH_DEBUGCTL_LBR);
		msrh_read_raw(t);
		msrh_wrmsr_safe(MSRH_MSR_LBR_SELECT, 0);
		this_cpu_write(msrh_cpu_owner, NULL);
		if (!t->removed && !t->trap_pending)
			msrh_publish_raw(t, MSRH_SNAP_SWITCH, ip);
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
	if (simulate_lbr || t->removed)
		goto out;
	if (this_cpu_read(msrh_cpu_owner) || msrh_rdmsr_safe(MSRH_MSR_DEBUGCTL, &dbg) ||
	    msrh_rdmsr_safe(MSRH_MSR_LBR_SELECT, &sel) || (dbg & MSRH_DEBUGCTL_LBR) || sel) {
		t->conflict = true; /* someone else (perf, a hypervisor) uses the LBR here */
		goto out;
	}
	t->conflict = false;
	if (t->raw_valid) { /* carry the thread's history across CPUs, like perf does */
		for (i = 0; i < msrh_cpu.depth; i++) {
			if (msrh_wrmsr_safe(msrh_cpu.from + i, t->raw_from[i]))
				msrh_wrmsr_safe(msrh_cpu.from + i, 0);
			if (msrh_wrmsr_safe(msrh_cpu.to + i, t->raw_to[i]))
				msrh_wrmsr_safe(msrh_cpu.to + i, 0);
			if (msrh_cpu.info && msrh_wrmsr_safe(msrh_cpu.info + i, t->raw_info[i]))
				msrh_wrmsr_safe(msrh_cpu.info + i, 0);
		}
		msrh_wrmsr_safe(MSRH_MSR_LBR_TOS, t->raw_tos);
	}
	if (msrh_wrmsr_safe(MSRH_MSR_LBR_SELECT, MSRH_LBR_SELECT_USER) ||
	    msrh_wrmsr_safe(MSRH_MSR_DEBUGCTL, dbg | MSRH_DEBUGCTL_LBR)) {
		msrh_wrmsr_safe(MSRH_MSR_LBR_SELECT, 0);
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
	t = msrh_find_rcu(prev);
	if (t)
		msrh_switch_out(t, prev);
	else if (owner == prev)
		msrh_cpu_release(prev); /* detached or exited while running: just stop */
	t = msrh_find_rcu(next);
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
			t->unlinked = true;
			list_del_rcu(&t->node);
			atomic_dec(&msrh_nr_targets);
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
		if (t->removed) {
			/* nothing */
		} else if (simulate_lbr) {
			msrh_publish_sim(t, why, args->regs->ip);
			t->trap_pending = true;
		} else if (this_cpu_read(msrh_cpu_owner) == current) {
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
	if (!simulate_lbr) {
		if (all_cpus) {
			on_each_cpu(msrh_cpu_release_ipi, t->task, 1);
		} else {
			local_irq_save(flags);
			msrh_cpu_release(t->task);
			local_irq_restore(flags);
		}
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
				victim->unlinked = true;
				list_del_rcu(&victim->node);
				atomic_dec(&msrh_nr_targets);
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
	if (simulate_lbr) {
		info.features |= MSRH_FEAT_SIMULATED;
		info.lbr_depth = MSRH_LBR_MAX;
	} else {
		info.lbr_depth = msrh_cpu.depth;
		info.lbr_from_msr = msrh_cpu.from;
		info.lbr_to_msr = msrh_cpu.to;
		info.lbr_info_msr = msrh_cpu.info;
	}
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

/* Is the LBR of this CPU free?  (Someone else's DEBUGCTL.LBR / LBR_SELECT means no.) */
static int msrh_lbr_free_here(void)
{
	u64 dbg = 0, sel = 0;
	int busy;

	preempt_disable();
	busy = msrh_rdmsr_safe(MSRH_MSR_DEBUGCTL, &dbg) || msrh_rdmsr_safe(MSRH_MSR_LBR_SELECT, &sel) ||
	       (dbg & MSRH_DEBUGCTL_LBR) || sel;
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
	if (!simulate_lbr) {
		err = msrh_lbr_free_here();
		if (err)
			goto out_put;
	}
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
			t->unlinked = true;
			list_del_rcu(&t->node);
			atomic_dec(&msrh_nr_targets);
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
	err = msrh_rdmsr_safe(r.msr, &v);
	r.cpu = smp_processor_id();
	preempt_enable();
	if (err)
		return -EIO;
	r.value = v;
	return copy_to_user(arg, &r, sizeof(r)) ? -EFAULT : 0;
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
		pr_warn("skipped and every snapshot is SYNTHETIC (not real branches).\n");
		pr_warn("************************************************************\n");
		add_taint(TAINT_USER, LOCKDEP_STILL_OK);
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
	if (!simulate_lbr)
		on_each_cpu(msrh_cpu_release_ipi, NULL, 1);
	rcu_barrier(); /* every call_rcu free has run */
	pr_info("unloaded: %d object(s) outstanding\n", atomic_read(&msrh_nr_objects));
}

module_init(msrh_init);
module_exit(msrh_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("LBR snapshots at ptrace stops for branchstub (read-only MSR access)");
MODULE_VERSION("1");
