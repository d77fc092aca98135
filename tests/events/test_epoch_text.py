"""``lanenb_trainer.epochs``: the events' 0-based epoch index in the words every view prints."""

from __future__ import annotations

import pytest

from lanenb_trainer.epochs import epoch_number, epoch_text


@pytest.mark.parametrize(("epoch", "epochs", "words"), [
    (0, None, "epoch 1"),  # the first epoch is epoch 1, as Keras' "Epoch 1/10"
    (6, None, "epoch 7"),
    (0, 10, "epoch 1/10"),
    (9, 10, "epoch 10/10"),  # the last of 10
    (10, 10, "epoch 10/10"),  # the loop's counter once done reads as the last epoch
    (None, 10, "epoch ?/10"),  # an event without the field is still shown
    (None, None, "epoch ?"),
    (-1, None, "epoch ?"),
    (True, None, "epoch ?"),
    ("3", None, "epoch ?"),
    (2, 0, "epoch 3"),  # no total to say
])
def test_epoch_words_count_from_one(epoch, epochs, words):
    assert epoch_text(epoch, epochs) == words


def test_the_number_is_the_index_plus_one():
    assert [epoch_number(i) for i in range(3)] == [1, 2, 3]
