"""Issue 16, items 1 and 2 without a server: chat messages and templates, the fields each
endpoint accepts or refuses (a 400 naming the field), stop strings. Pure functions."""

from __future__ import annotations

import pytest

from engine.server.api import ApiError, usage
from engine.server.chat import chat_choice, fallback_template, parse_messages
from engine.server.fields import CHAT_FIELDS, COMPLETION_FIELDS, parse_chat, parse_completion
from engine.server.stop import StopText


def completion(**body):
    return parse_completion({"prompt": [1, 2], **body}, "tiny", 100)


def chat(**body):
    msgs = body.pop("messages", [{"role": "user", "content": "Hi"}])
    return parse_chat({"messages": msgs, **body}, "tiny", fallback_template)


def refused(call, **body) -> ApiError:
    with pytest.raises(ApiError) as e:
        call(**body)
    assert e.value.status == 400
    return e.value


def test_fallback_template_is_role_lines_then_the_assistant_turn():
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    text = "<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\n"
    assert fallback_template(msgs) == text
    assert chat(messages=msgs).prompt == text
    assert len(text.encode()) == 11 + 10 + 9 + 3 + 14 == 47


def test_text_parts_are_joined_with_newlines():
    msgs = [{"role": "user", "content": [{"type": "text", "text": "a"},
                                         {"type": "text", "text": "b"}], "name": "x"}]
    assert parse_messages(msgs) == [{"role": "user", "content": "a\nb"}]


BAD_MESSAGES = {
    "not a list": ("hi", "messages"),
    "empty": ([], "messages"),
    "bad role": ([{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}],
                 "messages[1].role"),
    "no content": ([{"role": "user"}], "messages[0].content"),
    "image part": ([{"role": "user", "content": [{"type": "text", "text": "a"},
                                                 {"type": "image_url", "image_url": {}}]}],
                   "messages[0].content[1].type"),
    "tool calls": ([{"role": "assistant", "content": "a", "tool_calls": []}],
                   "messages[0].tool_calls"),
    "tool role": ([{"role": "tool", "content": "a"}], "messages[0].role"),
}


@pytest.mark.parametrize("case", sorted(BAD_MESSAGES))
def test_bad_messages_are_refused_naming_the_field(case):
    msgs, param = BAD_MESSAGES[case]
    assert refused(chat, messages=msgs).param == param


def test_a_template_that_raises_is_a_400_on_messages():
    def strict(msgs):
        raise ValueError("roles must alternate")

    with pytest.raises(ApiError) as e:
        parse_chat({"messages": [{"role": "user", "content": "a"}]}, "tiny", strict)
    assert e.value.param == "messages" and "roles must alternate" in e.value.message


REFUSED = {
    "unknown field": ({"tools": []}, "tools"),
    "temperature above 0": ({"temperature": 0.7}, "temperature"),
    "top_p below 1": ({"top_p": 0.9}, "top_p"),
    "top_k 5": ({"top_k": 5}, "top_k"),
    "penalty": ({"presence_penalty": 0.5}, "presence_penalty"),
    "seed text": ({"seed": "x"}, "seed"),
    "ignore_eos false": ({"ignore_eos": False}, "ignore_eos"),
    "five stops": ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    "empty stop": ({"stop": [""]}, "stop"),
    "stop number": ({"stop": 3}, "stop"),
    "options without stream": ({"stream_options": {"include_usage": True}}, "stream_options"),
    "unknown option": ({"stream": True, "stream_options": {"chunk_size": 2}},
                       "stream_options.chunk_size"),
    "continuous alone": ({"stream": True, "stream_options": {"continuous_usage_stats": True}},
                         "stream_options.continuous_usage_stats"),
    "include_usage text": ({"stream": True, "stream_options": {"include_usage": "yes"}},
                           "stream_options.include_usage"),
    "logprobs": ({"logprobs": 2}, "logprobs"),
    "n = 2": ({"n": 2}, "n"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
@pytest.mark.parametrize("call", [completion, chat], ids=["completions", "chat"])
def test_fields_that_cannot_be_honoured_are_refused_naming_them(call, case):
    body, param = REFUSED[case]
    assert refused(call, **body).param == param


def test_endpoint_specific_fields_are_refused_on_the_other_endpoint():
    assert refused(completion, messages=[]).param == "messages"
    assert refused(completion, max_completion_tokens=3).param == "max_completion_tokens"
    assert refused(chat, echo=False).param == "echo"
    assert refused(chat, max_tokens=3, max_completion_tokens=4).param == "max_tokens"
    assert refused(chat, top_logprobs=2).param == "top_logprobs"
    assert "messages" in CHAT_FIELDS - COMPLETION_FIELDS


def test_accepted_fields_and_what_they_become():
    req = completion(stop="\n", stream=True, min_tokens=2, max_tokens=9, temperature=0,
                     top_p=1, top_k=-1, seed=7, user="u", ignore_eos=True,
                     stream_options={"include_usage": True, "continuous_usage_stats": True})
    assert (req.stop, req.min_tokens, req.max_tokens, req.stream) == (("\n",), 2, 9, True)
    assert req.include_usage and req.continuous_usage and not req.chat
    assert completion().max_tokens == 16 and completion().stop == ()
    assert chat().max_tokens is None  # the app fills in what the context leaves
    assert chat(max_completion_tokens=5).max_tokens == 5 == chat(max_tokens=5).max_tokens
    assert chat(stop=["a", "b"]).stop == ("a", "b") and chat().chat


def test_usage_always_says_cached_tokens():
    assert usage(3, 4) == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7,
                           "prompt_tokens_details": {"cached_tokens": 0}}


def test_chat_choice_shapes():
    assert chat_choice("a", None, None, delta=True, first=True) == {
        "index": 0, "delta": {"role": "assistant", "content": "a"}, "logprobs": None,
        "finish_reason": None}
    assert chat_choice("b", "stop", [5], delta=False)["message"] == {
        "role": "assistant", "content": "b"}


def test_stop_text_holds_back_a_possible_stop_and_cuts_before_it():
    s = StopText(("\n\n",))
    assert s.add("ab\n", final=False, looking=True) == ("ab", False)
    assert s.add("\ncd", final=False, looking=True) == ("", True)
    assert s.text == "ab"


def test_stop_text_earliest_stop_wins_and_passes_text_without_stops():
    s = StopText(("cd", "b"))
    assert s.add("xabcd", final=False, looking=True) == ("xa", True)
    plain = StopText(())
    assert plain.add("abc", final=False, looking=True) == ("abc", False)


def test_stop_text_is_not_looked_for_before_min_tokens_and_flushes_at_the_end():
    s = StopText(("ab",))
    assert s.add("ab", final=False, looking=False) == ("a", False)  # "b" may start "ab"
    assert s.add("xa", final=False, looking=True) == ("bx", False)
    assert s.add("c", final=True, looking=True) == ("ac", False)
    assert s.text == "abxac"


def test_a_request_may_name_the_served_model_by_its_alias() -> None:
    from engine.server.fields import same_model

    assert same_model("smollm2-135m", "smollm2-135m")
    assert same_model("HuggingFaceTB/SmolLM2-135M-Instruct", "smollm2-135m")
    assert same_model("SMOLLM2-135M", "smollm2-135m")  # catalogue names are case-blind
    assert not same_model("llama-3.1-8b", "smollm2-135m")
    assert not same_model(5, "smollm2-135m")
    assert not same_model("my-folder", "other-folder")  # neither in the catalogue: exact only
