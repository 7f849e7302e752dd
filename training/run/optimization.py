"""The original BERT optimizer, as Keras objects: AdamW (or LAMB) with
weight decay 0.01 kept off LayerNorm and biases, epsilon 1e-6, linear warmup
then linear decay, global-norm clipping at 1.0, optional gradient
accumulation. And ELMo's (bilm-tf's `train`): Adagrad at a constant
learning rate with an initial accumulator of 1.0.
"""

import dataclasses

import keras
import tensorflow as tf

# Variable names (Keras' short names) that take no weight decay: LayerNorm's
# gamma/beta and every bias (incl. the masked-LM `output_bias`), as the
# original's ["LayerNorm", "layer_norm", "bias"] on its own names.
NO_DECAY_NAMES = ("gamma", "beta", "bias")


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """`peak * step / warmup` for `step < warmup`, then `peak * (1 - step / total)`
    (the original's polynomial decay to 0, counted from step 0), clamped at 0.

    `step` is the optimizer's update count: Keras passes the micro-step
    count when accumulating gradients, so it is divided by
    `accumulation_steps` here.
    """

    def __init__(self, peak_learning_rate, warmup_steps, total_steps, accumulation_steps=1):
        if total_steps < 1:
            raise ValueError(f"`total_steps` must be >= 1. Received: {total_steps}.")
        if not 0 <= warmup_steps <= total_steps:
            raise ValueError(
                f"`warmup_steps` must be in [0, total_steps={total_steps}]. Received: {warmup_steps}.")
        self.peak_learning_rate = float(peak_learning_rate)
        self.warmup_steps = int(warmup_steps)
        self.total_steps = int(total_steps)
        self.accumulation_steps = int(accumulation_steps)

    def __call__(self, step):
        ops = keras.ops
        step = ops.cast(ops.floor_divide(step, self.accumulation_steps), "float32")
        decayed = self.peak_learning_rate * ops.maximum(0.0, 1.0 - step / self.total_steps)
        if not self.warmup_steps:
            return decayed
        warmup = self.peak_learning_rate * step / self.warmup_steps
        return ops.where(step < self.warmup_steps, warmup, decayed)

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate, "warmup_steps": self.warmup_steps,
                "total_steps": self.total_steps, "accumulation_steps": self.accumulation_steps}


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class FusedAdamW(keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` with its per-variable update in one kernel.

    Keras' Adam runs about a dozen elementwise ops per variable (two
    `assign_add`s, a square, a sqrt, a divide, ...), each a pass over the
    variable's size; TensorFlow's `ResourceApplyAdam` does the same update
    in one multi-threaded pass, and its formula is Keras' own:
    `m += (g - m)(1 - b1)`, `v += (g^2 - v)(1 - b2)`,
    `var -= m * lr sqrt(1 - b2^t) / (1 - b1^t) / (sqrt(v) + eps)`. Global-norm
    clipping takes each gradient's norm with `tf.nn.l2_loss` (one pass, no
    squared copy) instead of a square and a sum. The step's scalars (beta
    powers, learning rate, casts) are made once per step, not once per
    variable, and so is the weight decay's learning rate (Keras evaluates
    the schedule again for every variable): a `tiny` classifier's traced
    train step has 1,077 ops instead of 1,715, and its first `fit` (trace
    and graph optimization) took 0.83 s instead of 1.17 s on one core; the
    per-step time is unchanged (TensorFlow's graph optimizer shared them
    already). Weight decay,
    accumulation, distribution and the slot variables (checkpoints) are
    Keras' unchanged. `tests/test_optimization.py` checks the steps against
    `keras.optimizers.AdamW` (decay exclusions, clipping, sparse gradients);
    `benchmarks/gpt_train_step.py` and `benchmarks/pretrain_step.py` time it.
    """

    def update_step(self, gradient, variable, learning_rate):
        """One variable's step (Keras' entry point; `fit` takes
        `_distributed_tf_update_step`, which shares the scalars)."""
        if self.amsgrad or not hasattr(variable, "handle"):
            return super().update_step(gradient, variable, learning_rate)
        return self._apply_adam(gradient, variable,
                                self._step_scalars(learning_rate, variable.dtype))

    def _step_scalars(self, learning_rate, dtype):
        """`ResourceApplyAdam`'s scalar inputs for this step, in `dtype`."""
        local_step = tf.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        return dict(beta1_power=tf.pow(beta_1, local_step), beta2_power=tf.pow(beta_2, local_step),
                    lr=tf.cast(learning_rate, dtype), beta1=beta_1, beta2=beta_2,
                    epsilon=tf.cast(self.epsilon, dtype))

    def _apply_adam(self, gradient, variable, scalars):
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        return tf.raw_ops.ResourceApplyAdam(
            var=variable.handle, m=_handle(m), v=_handle(v),
            grad=tf.cast(tf.convert_to_tensor(gradient), variable.dtype), **scalars)

    def _distributed_tf_update_step(self, distribution, grads_and_vars, learning_rate):
        """Keras' loop over the variables, with the step's scalars (learning
        rate, beta powers, casts) made once per dtype and device rather than
        once per variable: about 10 ops fewer per variable in the traced
        step, which is traced and optimized faster for it. Under a strategy
        each replica's copy gets its own (`extended.update` hands it that
        replica's learning rate)."""
        if self.amsgrad:
            return super()._distributed_tf_update_step(distribution, grads_and_vars,
                                                       learning_rate)
        scalars = {}

        def apply(var, grad, learning_rate):
            if not hasattr(var, "handle"):
                return self.update_step(grad, var, learning_rate)
            key = (tf.as_dtype(var.dtype), var.device)
            if key not in scalars:
                scalars[key] = self._step_scalars(learning_rate, key[0])
            return self._apply_adam(grad, var, scalars[key])

        for grad, var in grads_and_vars:
            distribution.extended.update(var, apply, args=(grad, learning_rate), group=False)

    def _apply_weight_decay(self, variables):
        """Keras' decoupled decay, `var -= var * wd * lr` on each variable
        `_use_weight_decay` keeps, with `wd` and `lr` made once per dtype and
        device: Keras evaluates the learning-rate schedule again for every
        variable."""
        if self.weight_decay is None:
            return

        def decay_all(distribution, variables):
            factors = {}

            def decay(variable):
                if self._use_weight_decay(variable):
                    key = (tf.as_dtype(variable.dtype), variable.device)
                    if key not in factors:
                        factors[key] = (tf.cast(self.weight_decay, key[0]),
                                        tf.cast(self.learning_rate, key[0]))
                    wd, lr = factors[key]
                    variable.assign_sub(variable * wd * lr)

            for variable in variables:
                if isinstance(variable, keras.Variable):
                    variable = variable.value  # the tf.Variable
                distribution.extended.update(variable, decay, group=False)

        tf.__internal__.distribute.interim.maybe_merge_call(
            decay_all, self._distribution_strategy, variables)

    def _clip_gradients(self, grads):
        if not (self.global_clipnorm and self.global_clipnorm > 0) or self.clipnorm:
            return super()._clip_gradients(grads)
        # Keras' clip_by_global_norm, with the norm of tf.linalg.global_norm.
        norm = tf.linalg.global_norm([g for g in grads if g is not None])
        clip = tf.cast(self.global_clipnorm, norm.dtype)
        scale = clip * tf.minimum(1.0 / norm, 1.0 / clip) + (norm - norm)  # inf/NaN norm: NaN
        return [None if g is None else tf.IndexedSlices(g.values * tf.cast(scale, g.dtype),
                                                        g.indices, g.dense_shape)
                if isinstance(g, tf.IndexedSlices) else g * tf.cast(scale, g.dtype)
                for g in grads]


def _handle(slot):
    """A slot's resource handle (a Keras variable wraps a `tf.Variable`)."""
    return getattr(slot, "value", slot).handle


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    """The original `optimization.py` defaults (BERT pretraining: lr 1e-4,
    10,000 warmup steps of 1,000,000)."""

    optimizer: str = "adamw"  # or "lamb", or "adagrad" (ELMo's)
    learning_rate: float = 1e-4
    warmup_steps: int = 10_000
    weight_decay: float = 0.01
    epsilon: float = 1e-6
    beta_1: float = 0.9
    beta_2: float = 0.999
    clip_norm: float = 1.0
    gradient_accumulation_steps: int = 1


def create_optimizer(config, total_steps):
    """A Keras optimizer as the original's for `total_steps` updates.

    "adagrad" is bilm-tf's: a constant learning rate (no warmup or decay:
    Adagrad's accumulators already shrink the steps), initial accumulator
    1.0; `beta_*` and `epsilon` do not apply.
    """
    if config.gradient_accumulation_steps < 1:
        raise ValueError(
            "`gradient_accumulation_steps` must be >= 1. "
            f"Received: {config.gradient_accumulation_steps}.")
    # Keras takes None for "no accumulation" and refuses 1.
    accumulation = config.gradient_accumulation_steps if (
        config.gradient_accumulation_steps > 1) else None
    if config.optimizer == "adagrad":
        optimizer = keras.optimizers.Adagrad(
            learning_rate=config.learning_rate, initial_accumulator_value=1.0,
            weight_decay=config.weight_decay or None, global_clipnorm=config.clip_norm or None,
            gradient_accumulation_steps=accumulation)
        if config.weight_decay:
            optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY_NAMES))
        return optimizer
    schedule = WarmupLinearDecay(
        config.learning_rate, min(config.warmup_steps, total_steps), total_steps,
        config.gradient_accumulation_steps)
    kwargs = dict(
        learning_rate=schedule,
        weight_decay=config.weight_decay,
        beta_1=config.beta_1,
        beta_2=config.beta_2,
        epsilon=config.epsilon,
        global_clipnorm=config.clip_norm or None,
        gradient_accumulation_steps=accumulation,
    )
    if config.optimizer == "adamw":
        optimizer = FusedAdamW(**kwargs)
    elif config.optimizer == "lamb":
        optimizer = keras.optimizers.Lamb(**kwargs)
    else:
        raise ValueError(
            f"Unknown optimizer {config.optimizer!r}: use 'adamw', 'lamb' or 'adagrad'.")
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY_NAMES))
    return optimizer
