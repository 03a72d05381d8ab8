"""tf.train.Example / SequenceExample builders for the golden-file generators in this folder and
the TensorFlow parity tests (python/tests/test_parsing_parity.py): the inputs TensorFlow's own
tests build, written once. `deterministic` fixes the order of map entries in the bytes (the
golden files must not change from run to run)."""

from __future__ import annotations

import tensorflow as tf


def i64(v):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=v))


def f32(v):
    return tf.train.Feature(float_list=tf.train.FloatList(value=v))


def byt(v):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=v))


def example(d, deterministic: bool = True) -> bytes:
    return tf.train.Example(features=tf.train.Features(feature=d)).SerializeToString(
        deterministic=deterministic)


def seq_example(context=None, lists=None, deterministic: bool = True) -> bytes:
    """A SequenceExample; without `context` its context field is absent (not present and empty:
    the bytes differ)."""
    msg = tf.train.SequenceExample(feature_lists=tf.train.FeatureLists(feature_list={
        k: tf.train.FeatureList(feature=v) for k, v in (lists or {}).items()}))
    if context is not None:
        msg.context.CopyFrom(tf.train.Features(feature=context))
    return msg.SerializeToString(deterministic=deterministic)
