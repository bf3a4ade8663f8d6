"""The catalogue's part for the health gate: each item's name and verdict (`bot.gate.items`)
and the GPU smoke test's findings (`bot.gate.smoke_test`).

Why a part of its own: a gate item keeps its key and values and is said again later in the
reader's language, so these keys are part of what the timeline stores and must stay stable.
What it must never do: rename a key an item may have stored, or import anything but the
shared nouns: `bot.texts` assembles it.
"""

from __future__ import annotations

from bot.model import Lang

EN, ZH = Lang.EN, Lang.ZH

TEXTS: dict[str, dict[Lang, str]] = {
    # -- the health gate's items (`bot.gate.items`) --------------------------------------
    "gate.line": {EN: "{name}: {reason}", ZH: "{name}：{reason}"},
    "gate.separator": {EN: "; ", ZH: "；"},
    "gate.name.node-ready": {EN: "node-ready", ZH: "节点就绪"},
    "gate.name.gpus-allocatable": {EN: "gpus-allocatable", ZH: "GPU 可分配"},
    "gate.name.driver-consistent": {EN: "driver-consistent", ZH: "驱动一致"},
    "gate.name.mig-state": {EN: "mig-state", ZH: "MIG 配置"},
    "gate.name.driver-upgrade": {EN: "driver-upgrade", ZH: "驱动升级"},
    "gate.name.gpu-operator-pods": {EN: "gpu-operator-pods", ZH: "GPU Operator 组件"},
    "gate.name.gpu-errors": {EN: "gpu-errors", ZH: "GPU 错误告警"},
    "gate.name.no-new-gpu-errors": {EN: "no-new-gpu-errors", ZH: "无新 GPU 错误"},
    "gate.name.dcgm-diag": {EN: "dcgm-diag", ZH: "DCGM 诊断"},
    "gate.name.nccl-tests": {EN: "nccl-tests", ZH: "nccl-tests 测试"},
    "gate.name.gpu-smoke-test": {EN: "gpu-smoke-test", ZH: "GPU 冒烟测试"},
    "gate.not_ready": {EN: "node Ready={ready}", ZH: "节点未就绪（Ready={ready}）"},
    "gate.pressure": {EN: "Ready, but {pressure}", ZH: "已就绪，但有 {pressure}"},
    "gate.ready": {EN: "Ready, no pressure conditions", ZH: "已就绪，无资源压力"},
    "gate.no_gpu_facts": {EN: "no GPU facts for the node", ZH: "没有该节点的 GPU 信息"},
    "gate.mig_nothing": {
        EN: "MIG config {config} offers nothing",
        ZH: "MIG 配置 {config} 没有提供任何设备",
    },
    "gate.mig_offered": {EN: "MIG layout {config} offered", ZH: "已提供 MIG 布局 {config}"},
    "gate.no_gpu": {EN: "the node offers no GPU", ZH: "节点没有提供 GPU"},
    "gate.allocatable": {
        EN: "{gpus} of {count} GPUs allocatable",
        ZH: "可分配 GPU {gpus}/{count}",
    },
    "gate.no_driver": {EN: "no driver version label", ZH: "没有驱动版本标签"},
    "gate.driver": {EN: "driver {version}", ZH: "驱动 {version}"},
    "gate.driver_ahead": {
        EN: "driver {version}: upgraded; the pool's rolling upgrade goes on",
        ZH: "驱动 {version}：已升级；节点池的滚动升级仍在进行",
    },
    "gate.driver_adrift": {
        EN: "driver {version}, pool {pool} mostly runs {common}",
        ZH: "驱动 {version}，而节点池 {pool} 大多运行 {common}",
    },
    "gate.driver_as_pool": {
        EN: "driver {version}, as the pool",
        ZH: "驱动 {version}，与节点池一致",
    },
    "gate.mig_unused": {EN: "MIG not used", ZH: "未使用 MIG"},
    "gate.mig_pending": {
        EN: "MIG config {config}: nvidia.com/mig.config.state={state}",
        ZH: "MIG 配置 {config} 未生效：nvidia.com/mig.config.state={state}",
    },
    "gate.mig_applied": {EN: "MIG config {config} applied", ZH: "MIG 配置 {config} 已生效"},
    "gate.upgrading": {
        EN: "driver upgrade state={state}",
        ZH: "驱动升级进行中（state={state}）",
    },
    "gate.no_upgrade": {EN: "no driver upgrade under way", ZH: "没有进行中的驱动升级"},
    "gate.component_failing": {
        EN: "{component} failing ({why})",
        ZH: "{component} 异常（{why}）",
    },
    "gate.component_down": {
        EN: "{component} failing (not running)",
        ZH: "{component} 异常（未运行）",
    },
    "gate.component_missing": {
        EN: "{component} missing (no pod on the node)",
        ZH: "{component} 缺失（节点上没有它的 pod）",
    },
    "gate.operator_runs": {
        EN: "every GPU Operator pod of the node runs",
        ZH: "节点上的 GPU Operator pod 全部在运行",
    },
    "gate.xid": {EN: "Xid {code}", ZH: "Xid {code} 错误"},
    "gate.xid_on": {EN: "Xid {code} on GPU {gpu}", ZH: "GPU {gpu} 上的 Xid {code} 错误"},
    "gate.no_gpu_alert": {EN: "no GPU error alert firing", ZH: "没有正在触发的 GPU 错误告警"},
    "gate.no_prometheus": {
        EN: "no Prometheus evidence for the window",
        ZH: "观察窗口内没有 Prometheus 数据",
    },
    "gate.new_errors_until": {
        EN: "{errors} (out of the window by {by} UTC if no new error comes)",
        ZH: "{errors}（若无新错误，将于 {by} UTC 移出观察窗口）",
    },
    "gate.no_new_errors": {
        EN: "no Xid, ECC or NVLink errors in the window",
        ZH: "观察窗口内没有 Xid、ECC 或 NVLink 错误",
    },
    "gate.unknown": {EN: "not reported", ZH: "未上报"},
    "gate.pass": {EN: "passed", ZH: "通过"},
    "gate.fail": {EN: "failed", ZH: "未通过"},
    "gate.not_run": {EN: "not run", ZH: "未运行"},
    # -- the GPU smoke test's findings (`bot.gate.smoke_test`); blanks hold what
    # Kubernetes and nvidia-smi said, as they said it
    "smoke.no_count": {
        EN: "no GPU count to test against",
        ZH: "没有可对照的 GPU 数量",
    },
    "smoke.not_created": {
        EN: "smoke-test pod not created: {error}",
        ZH: "未能创建冒烟测试 Pod：{error}",
    },
    "smoke.deleted": {EN: "the smoke-test pod was deleted", ZH: "冒烟测试 Pod 已被删除"},
    "smoke.timed_out": {
        EN: "the smoke-test pod did not finish within {seconds}s: {state}",
        ZH: "冒烟测试 Pod 未在 {seconds} 秒内结束：{state}",
    },
    "smoke.timed_out_read": {
        EN: "the smoke-test pod did not finish within {seconds}s: {state}; last read failed: "
        "{error}",
        ZH: "冒烟测试 Pod 未在 {seconds} 秒内结束：{state}；最后一次读取失败：{error}",
    },
    "smoke.passed": {
        EN: "nvidia-smi -L listed all {count} GPUs ({models})",
        ZH: "nvidia-smi -L 列出了全部 {count} 块 GPU（{models}）",
    },
    "smoke.missing": {
        EN: "nvidia-smi -L listed {listed} of {count} GPUs, missing GPU {missing}; exit code "
        "{code}",
        ZH: "nvidia-smi -L 只列出 {count} 块 GPU 中的 {listed} 块，缺少 GPU {missing}；退出码 "
        "{code}",
    },
    "smoke.missing_said": {
        EN: "nvidia-smi -L listed {listed} of {count} GPUs, missing GPU {missing}; exit code "
        "{code}; {output}",
        ZH: "nvidia-smi -L 只列出 {count} 块 GPU 中的 {listed} 块，缺少 GPU {missing}；退出码 "
        "{code}；{output}",
    },
    "smoke.exit_said": {EN: "exit code {code}; {output}", ZH: "退出码 {code}；{output}"},
    "gate.smoke_missing": {
        EN: "nvidia-smi -L listed {listed} of the node's {count} GPUs, missing GPU {missing}",
        ZH: "nvidia-smi -L 只列出节点 {count} 块 GPU 中的 {listed} 块，缺少 GPU {missing}",
    },
}
