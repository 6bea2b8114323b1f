"""headroom anomaly: pure detection core (no I/O).

* bursts: :class:`~anomaly.cusum.CusumDetector` (+ :class:`~anomaly.cusum.CusumState`
  to persist and resume), baselines :class:`~anomaly.burst_baselines.ThresholdDetector`
  and :class:`~anomaly.burst_baselines.PeltDetector`;
* hardware faults: :func:`~anomaly.fault_features.build_fault_features`,
  :class:`~anomaly.faults.FaultPredictor`;
* spot-price spikes: :func:`~anomaly.spike_features.build_spike_frame`,
  :class:`~anomaly.spikes.SpikePredictor`, :class:`~anomaly.spikes.PersistenceSpikeBaseline`;
* :class:`~anomaly.alert.Alert`, the value every detector's findings become;
* :mod:`anomaly.evaluate`: the evaluations behind ``headroom ... evaluate``.
"""
