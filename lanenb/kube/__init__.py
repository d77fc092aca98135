"""Kubernetes plumbing shared by the job backends, the dataset fetch and the CSI snapshot
store: client loading and retries (``client``), name rules (``rules``, ``names``), watches,
Warning events, pod logs and pod states in words (``pods``), and the snapshot/PVC objects
(``objects``). Knows nothing of jobs; imports the ``kubernetes`` package only when used."""
