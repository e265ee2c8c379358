"""The one JSON form of the frozen dataclasses: literals in, literals out."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from harness import serialise
from harness.errors import HarnessError


@dataclass(frozen=True)
class Item:
    name: str
    count: int = 0


@dataclass(frozen=True, kw_only=True)
class Order:
    order_id: str
    status: Literal["open", "closed"]
    note: str = ""
    price_usd: float | None = None
    items: tuple[Item, ...] = ()
    first: Item | None = None
    folder: Path | None = None
    labels: dict[str, str] = dataclasses.field(default_factory=dict)


# The same document one version later: a field added, and nothing else edited.
@dataclass(frozen=True, kw_only=True)
class OrderWithTags:
    order_id: str
    status: Literal["open", "closed"]
    note: str = ""
    price_usd: float | None = None
    items: tuple[Item, ...] = ()
    first: Item | None = None
    folder: Path | None = None
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    gift_tags: tuple[str, ...] = ()


ORDER = Order(
    order_id="o1",
    status="open",
    note="Grüße ✓",
    price_usd=2.5,
    items=(Item("pen", 2), Item("ink")),
    first=Item("pen", 2),
    folder=Path("/orders/o1"),
    labels={"snake_key": "kept as written"},
)
ORDER_JSON = {
    "orderId": "o1",
    "status": "open",
    "note": "Grüße ✓",
    "priceUsd": 2.5,
    "items": [{"name": "pen", "count": 2}, {"name": "ink", "count": 0}],
    "first": {"name": "pen", "count": 2},
    "folder": "/orders/o1",
    "labels": {"snake_key": "kept as written"},
}


def decode_error(data: Any) -> serialise.DecodeError:
    with pytest.raises(serialise.DecodeError) as caught:
        serialise.from_json(Order, data)
    return caught.value


def test_a_dataclass_is_written_with_camel_case_keys_in_field_order() -> None:
    data = serialise.to_json(ORDER)

    assert data == ORDER_JSON
    assert list(data) == list(ORDER_JSON)


def test_what_is_written_reads_back_the_same() -> None:
    assert serialise.from_json(Order, serialise.to_json(ORDER)) == ORDER
    assert serialise.load_json(Order, serialise.dump_json(ORDER)) == ORDER
    assert serialise.load_json(Order, json.dumps(ORDER_JSON)) == ORDER


def test_compact_json_is_utf_8_without_spaces() -> None:
    data = serialise.dump_json(Item("ünï", 1))

    assert data == '{"name":"ünï","count":1}'.encode()


def test_missing_keys_and_nulls_take_the_defaults() -> None:
    old = {"orderId": "o1", "status": "open", "note": None, "items": None, "labels": None}

    assert serialise.load_json(Order, json.dumps(old)) == Order(order_id="o1", status="open")
    assert serialise.from_json(Order, old) == Order(order_id="o1", status="open")


def test_nulls_take_the_defaults_inside_lists_and_nested_objects_too() -> None:
    old = {
        "orderId": "o1",
        "status": "open",
        "items": [{"name": "pen", "count": None}],
        "first": {"name": "ink", "count": None},
    }

    order = serialise.load_json(Order, json.dumps(old))

    assert order.items == (Item("pen", 0),)
    assert order.first == Item("ink", 0)


def test_snake_case_keys_and_unknown_keys_read_and_an_integer_is_a_float() -> None:
    data = {"order_id": "o1", "status": "open", "price_usd": 3, "someday": [1, 2]}

    order = serialise.load_json(Order, json.dumps(data))

    assert order == Order(order_id="o1", status="open", price_usd=3.0)
    assert isinstance(order.price_usd, float)


def test_a_new_field_needs_no_other_edit() -> None:
    earlier = serialise.dump_json(ORDER)
    tagged = OrderWithTags(**vars(ORDER), gift_tags=("red",))

    assert serialise.load_json(OrderWithTags, earlier).gift_tags == ()
    assert serialise.to_json(tagged)["giftTags"] == ["red"]
    assert serialise.load_json(OrderWithTags, serialise.dump_json(tagged)) == tagged
    # A newer document still reads in the earlier version: the new key is ignored.
    assert serialise.load_json(Order, serialise.dump_json(tagged)) == ORDER


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"items": [{"name": "pen"}, {"name": "ink", "count": "two"}]},
         "items[1].count: expected an integer, found a string ('two')"),
        ({"priceUsd": "2.5"}, "priceUsd: expected a number, found a string ('2.5')"),
        ({"note": 7}, "note: expected a string, found an integer (7)"),
        ({"status": "shipped"}, "status: 'shipped' is not one of: open, closed"),
        ({"orderId": None}, "orderId: expected a string, found null"),
        ({"first": ["pen"]}, "first: expected a mapping, found a list of 1 item(s)"),
        ({"items": {"pen": 1}}, "items: expected a list of mappings, found a mapping"),
    ],
    ids=["nested-item", "string-number", "number-string", "choice", "required-null",
         "not-an-object", "not-a-list"],
)  # fmt: skip
def test_a_wrong_type_is_named_by_its_path_with_what_was_found(
    change: dict[str, Any], expected: str
) -> None:
    error = decode_error(ORDER_JSON | change)

    assert expected in error.message
    assert error.message.startswith("not a valid Order: ")
    assert isinstance(error, ValueError) and isinstance(error, HarnessError)


def test_a_missing_key_without_a_default_is_named_and_the_fix_says_to_add_it() -> None:
    error = decode_error({"orderId": "o1"})

    assert error.message == "not a valid Order: status: missing"
    assert "status" in error.fix
    assert [problem.path for problem in error.problems] == ["status"]


def test_text_that_is_not_json_or_not_an_object_is_named_as_a_whole() -> None:
    with pytest.raises(serialise.DecodeError, match=r"\(top level\): not valid JSON"):
        serialise.load_json(Order, b"{not json")
    assert "(top level): expected a mapping, found a list" in decode_error([]).message


def test_given_fields_are_set_whatever_the_document_says() -> None:
    def load(data: dict[str, Any]) -> Order:
        return serialise.load_json(Order, json.dumps(data), given={"order_id": "from-outside"})

    assert load(ORDER_JSON).order_id == "from-outside"
    assert load({"status": "open"}).order_id == "from-outside"
    assert load({"order_id": 5, "status": "open"}).order_id == "from-outside"


def test_the_schema_has_the_dataclass_keys_for_wording_problems() -> None:
    model = serialise.schema(Order)

    fields = model.model_fields
    assert [info.alias for info in fields.values()] == list(ORDER_JSON)
    assert fields["first"].annotation == serialise.schema(Item) | None
