"""OCR methods of the asynchronous client: ``ocr``, ``ocr_pdf`` and ``check_ngram_processor``.

The pure parts (options, requests, page preparation, parsing) are in ``vllm_tasks.ocr``; the CPU-heavy
steps (image decoding and encoding, PDF rendering) go through ``async_offload``.
``vllm_tasks/_sync/ocr.py`` is generated from this file by ``scripts/unasync.py``.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .. import defaults, pdf
from .. import ocr as ocr_parts
from ..calls import CLIENT_DEFAULT, CallOptions, TimeoutLike, resolve_model
from ..discovery import NGRAM_PROCESSOR, NGRAM_PROCESSOR_FLAG, missing_processor_message
from ..errors import InvalidInputError
from ..images import ImageInput, PreparedImage, is_remote_url, prepare_image
from ..ocr import ladder
from ..ocr.formats import FORMATS
from ..ocr.ladder import PageQuality
from ..ocr.presets import PRESET_DEFAULT, OCRPreset, PresetDefaultType, ocr_preset, preset_named
from ..offload import async_offload
from ..progress import Progress
from ..types.common import Usage
from ..types.ocr import OCRDocument, OCRPage, OCRResult
from ..types.server import ServerInfo
from . import discovery
from .base import AsyncClientBase
from .fetching import fetch_input


class AsyncOCRMethods(AsyncClientBase):
    """``ocr`` and ``ocr_pdf``: an OCR model through ``/v1/chat/completions``, each request shaped by the
    model's preset (``vllm_tasks.ocr.presets``)."""

    async def ocr(
        self,
        image: ImageInput,
        *,
        preset: str | OCRPreset | None = None,
        task: str | None = None,
        prompt: str | None = None,
        max_tokens: int | PresetDefaultType | None = PRESET_DEFAULT,
        ngram_size: int | PresetDefaultType | None = PRESET_DEFAULT,
        window_size: int | PresetDefaultType | None = PRESET_DEFAULT,
        whitelist_token_ids: Sequence[int] | PresetDefaultType | None = PRESET_DEFAULT,
        temperature: float | None = None,
        require_ngram_processor: bool = False,
        fetch_urls: bool = True,
        max_side: int | PresetDefaultType | None = PRESET_DEFAULT,
        downscale: bool = True,
        model: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> OCRResult:
        """OCR one image with the served OCR model: text, clean markdown, layout blocks with pixel boxes
        (where the model writes them) and the model's metadata.

        The request is shaped by the model's preset (recognised from the served model, or ``preset=``):
        its prompt, the order of image and text, sampling, extras, image size; its answer is read by the
        preset's format. The image is checked before upload (it decodes; at most 178,956,970 pixels,
        PIL's bomb limit, above which the server answers 500; longest side at most ``max_side``, else
        downscaled) and sent as a base64 data URL. For DeepSeek-OCR the first call on a client checks
        once that the server runs the n-gram logits processor; without it ``vllm_xargs`` are silently
        ignored (a warning, or an error with ``require_ngram_processor=True``).

        Args:
            image: a path, ``bytes``, a binary file object, a PIL image, a numpy array, a ``data:`` URL,
                or an ``http(s)`` URL (fetched by the client, without your API key, unless
                ``fetch_urls=False``).
            preset: the model's preset: a name in ``vllm_tasks.ocr.presets.PRESETS``
                (``"deepseek-ocr"``, ``"generic"`` for any vision-chat model, ...) or an ``OCRPreset``;
                default: recognised from the served model.
            task: one of the preset's tasks (default: its first); DeepSeek-OCR's: ``"markdown"`` (layout
                + markdown), ``"ocr"`` (text lines with boxes), ``"free"`` (plain text), ``"figure"``,
                ``"describe"``, ``"locate:TEXT"``.
            prompt: text sent instead of the task's prompt (a task's name is that task).
            max_tokens: output limit (default: the preset's, 4096 for DeepSeek-OCR); a page cut short has
                ``truncated=True`` and warns.
            ngram_size: DeepSeek-OCR's n-gram repetition guard (``vllm_xargs``; default: the recipe's
                30); ``None`` sends no ``vllm_xargs``. Refused for a preset without the guard.
            window_size: how many recent tokens the guard looks at (default: the recipe's 90).
            whitelist_token_ids: tokens never banned (default: ``<td>``, ``</td>``).
            temperature: sampling temperature (default: the preset's).
            require_ngram_processor: raise :class:`UnsupportedByServer` instead of warning when the
                server lacks the processor.
            fetch_urls: fetch ``http(s)`` images client-side (the server can only reach what it can
                reach, and answers 500 after 5 s otherwise). ``False`` is refused under
                ``FetchLimits(refuse_private=True)``: the server would fetch the URL unchecked.
            max_side: longest side sent, in pixels (default: the preset's; ``None``: no limit).
            downscale: False refuses an image over ``max_side`` instead of downscaling it.
            model: served model name (default: the client's, else the server's first).
            extra_body: extra JSON fields merged into the request (``{"return_token_ids": True}``: the
                result's ``token_ids`` and ``prompt_token_ids``).
            extra_headers: extra headers for the request.
            timeout: request timeout (default: the client's).

        Returns:
            OCRResult: ``.text`` (raw), ``.markdown``, ``.blocks`` (label, text, boxes in pixels of the
            original image), ``.metadata``, ``.preset``, ``.usage``, ``.finish_reason``, ``.truncated``;
            ``.draw()`` and ``.crop()``.

        Raises:
            InvalidInputError: bad arguments, before any page is sent: ``field="preset"`` when no preset
                recognises the served model (the message lists them), a task the preset lacks, DeepSeek's
                n-gram arguments for another preset; ``kind`` ``"image_decode"``: the image does not
                decode, ``"image_too_large"``, ``"image_fetch"`` (an ``InputFetchError``).
            UnsupportedByServer: ``vllm_xargs`` on vLLM < 0.11.1, or no processor with
                ``require_ngram_processor=True``.
            EndpointNotServed: the server's model does not serve chat completions.

        Warns:
            NGramProcessorMissingWarning: the server ignores ``vllm_xargs`` (first call only).
            OCRTruncatedWarning: the output hit ``max_tokens``.

        Examples:
            >>> result = await client.ocr("page.png")
            >>> print(result.markdown)
            >>> result.draw().save("page-boxes.png")
        """
        options = ocr_parts.OCRParams(
            preset=preset,
            task=task,
            prompt=prompt,
            max_tokens=max_tokens,
            ngram_size=ngram_size,
            window_size=window_size,
            whitelist_token_ids=whitelist_token_ids,
            temperature=temperature,
            require_ngram_processor=require_ngram_processor,
            max_side=max_side,
        )
        call = CallOptions(model, extra_body, extra_headers, timeout)
        # The image is checked before any request; sized once the preset (perhaps the server's) is known.
        if options.max_side is not PRESET_DEFAULT:
            first_side = options.max_side
        else:
            first_side = preset_named(options.preset).max_side if options.preset is not None else None
        prepared = await self._load_image(image, first_side, fetch_urls=fetch_urls, downscale=downscale)
        return self._counted(await self._ocr(prepared, options, call, downscale=downscale))

    async def _ocr(
        self,
        prepared: PreparedImage | str,
        options: ocr_parts.OCRParams,
        call: CallOptions,
        *,
        downscale: bool = True,
    ) -> OCRResult:
        info = await self.server_info()
        model = resolve_model(info, call.model, self.model)
        request = ocr_parts.plan_request(ocr_preset(info, model, options.preset), options)
        prepared = await async_offload(ocr_parts.fit_image, prepared, request, downscale=downscale)
        await self._ensure_ngram_processor(request, info, model, call.extra_headers)
        url = prepared.data_url if isinstance(prepared, PreparedImage) else prepared
        response = await self._transport.send(ocr_parts.page_request(url, request, model, call))
        result = ocr_parts.parse_response(
            response, prepared, request.prompt, preset=request.preset, output=request.output, warn=False
        )
        if result.truncated:  # stacklevel: _ocr < ocr < the caller
            warnings.warn(ocr_parts.truncated_message(result), ocr_parts.OCRTruncatedWarning, stacklevel=3)
        return result

    async def _load_image(
        self, image: ImageInput, max_side: int | None, *, fetch_urls: bool, downscale: bool
    ) -> PreparedImage | str:
        """Check and encode an image (in a worker thread); an ``http(s)`` URL is fetched first, unless
        ``fetch_urls=False``: then the URL itself is returned, for the server to fetch.
        """
        if is_remote_url(image):
            url = str(image).strip()
            if not fetch_urls:
                if self._transport.settings.fetch_limits.refuse_private:
                    raise InvalidInputError(
                        "fetch_urls",
                        fetch_urls,
                        "lets the server fetch the image URL unchecked, which "
                        "FetchLimits(refuse_private=True) refuses",
                        "leave fetch_urls on (the client fetches and checks the URL), or download the image "
                        "yourself and pass the bytes",
                    )
                return url
            image = await fetch_input(
                self._transport, url, field="image", kind="image_fetch", timeout=defaults.FETCH_TIMEOUT
            )
        return await async_offload(
            prepare_image, image, field="image", max_side=max_side, downscale=downscale
        )

    async def _ensure_ngram_processor(
        self,
        request: ocr_parts.OCRRequest,
        info: ServerInfo,
        model: str | None,
        extra_headers: Mapping[str, str] | None,
    ) -> None:
        """Gate ``vllm_xargs`` on the server version, then check the preset's processor once per client."""
        if not ocr_parts.uses_ngram_processor(request, info):
            return
        known = self._server_state.knows(NGRAM_PROCESSOR, model or "")
        found = await self._ngram_processor(model, extra_headers)
        if not known and found is False and not request.require_processor:
            # stacklevel: here < _ocr / _ocr_pdf < ocr / ocr_pdf < the caller
            warnings.warn(
                missing_processor_message(request.preset.server_check or NGRAM_PROCESSOR_FLAG),
                ocr_parts.NGramProcessorMissingWarning,
                stacklevel=4,
            )
        ocr_parts.require_ngram_processor(found, request, info)

    async def ocr_pdf(
        self,
        pdf: Any,
        *,
        pages: Sequence[int] | str | None = None,
        dpi: float = defaults.OCR_PDF_DPI,
        concurrency: int = defaults.OCR_PDF_CONCURRENCY,
        show_progress: bool = False,
        quality: PageQuality | None = ladder.DEFAULT_QUALITY,
        preset: str | OCRPreset | None = None,
        task: str | None = None,
        prompt: str | None = None,
        max_tokens: int | PresetDefaultType | None = PRESET_DEFAULT,
        ngram_size: int | PresetDefaultType | None = PRESET_DEFAULT,
        window_size: int | PresetDefaultType | None = PRESET_DEFAULT,
        whitelist_token_ids: Sequence[int] | PresetDefaultType | None = PRESET_DEFAULT,
        temperature: float | None = None,
        require_ngram_processor: bool = False,
        max_side: int | PresetDefaultType | None = PRESET_DEFAULT,
        model: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> OCRDocument:
        """OCR the pages of a PDF: rendered with pypdfium2, sent with bounded concurrency, in page order.

        Pages are rendered a few at a time (a 200-page PDF never sits in memory as bitmaps) and kept as
        PNG bytes for ``draw()``/``crop()`` on each page's result.

        Args:
            pdf: a path, ``bytes`` or binary file object.
            pages: 1-based page numbers, or a spec such as ``"1-5,8"`` or ``"3-"``; default: all pages.
            dpi: rendering resolution (144 gives ~1190 x 1684 px for A4).
            concurrency: pages in flight.
            show_progress: draw a tqdm bar.
            quality: the page-quality ladder (:class:`~vllm_tasks.ocr.PageQuality`; default: olmOCR's): a
                page whose answer is truncated, over the context or refused by the output format is
                tried again at rising temperatures (rotated where the model says so); a page that fails
                every try is kept as the PDF's own text (or empty) and listed in ``failed_pages``; too
                many failed pages raise :class:`~vllm_tasks.ocr.OCRDocumentFailed`. ``None``: one try per
                page, kept whatever it is (a truncated page warns).

        The other arguments (``preset``, ``task``, ``prompt``, ``model``, ``max_tokens``, ``ngram_size``,
        ``window_size``, ``whitelist_token_ids``, ``temperature``, ``require_ngram_processor``,
        ``max_side``, ``extra_body``, ``extra_headers``, ``timeout``) are as for :meth:`ocr`.

        Returns:
            OCRDocument: ``.pages`` (``page``, ``result``, ``tries``, ``rotation``, ``failure``) in page
            order, ``.markdown`` (pages joined with ``---``), ``.usage`` (every try of every page),
            ``.truncated_pages``, ``.failed_pages``.

        Raises:
            InvalidInputError: bad page numbers, dpi, concurrency or quality; a file that is not a PDF.
            OCRDocumentFailed: more pages failed every try than ``quality.max_page_error_rate`` allows
                (``error.document`` holds every page).
            MissingDependency: pypdfium2 or pillow is not installed (``pip install "vllm-tasks[image]"``).
            UnsupportedByServer, EndpointNotServed: as for :meth:`ocr`.

        Examples:
            >>> doc = await client.ocr_pdf("report.pdf", pages="1-5", concurrency=4)
            >>> open("report.md", "w").write(doc.markdown)
        """
        options = ocr_parts.OCRParams(
            preset=preset,
            task=task,
            prompt=prompt,
            max_tokens=max_tokens,
            ngram_size=ngram_size,
            window_size=window_size,
            whitelist_token_ids=whitelist_token_ids,
            temperature=temperature,
            require_ngram_processor=require_ngram_processor,
            max_side=max_side,
        )
        plan = ocr_parts.plan_pdf(pages, dpi, concurrency)
        call = CallOptions(model, extra_body, extra_headers, timeout)
        quality = ladder.quality_of(quality)
        return self._counted(
            await self._ocr_pdf(pdf, options, plan, call, quality=quality, show_progress=show_progress)
        )

    async def _ocr_pdf(
        self,
        source: Any,
        options: ocr_parts.OCRParams,
        plan: ocr_parts.PDFPlan,
        call: CallOptions,
        *,
        quality: PageQuality | None,
        show_progress: bool,
    ) -> OCRDocument:
        if quality is not None and quality.text_layer_fallback:  # read again for a failed page's text
            source = await async_offload(pdf.reopenable, source)
        # Opening the PDF checks it and the page numbers before any request.
        total, rendered = await async_offload(pdf.render_pages, source, plan.pages, plan.dpi)
        try:
            info = await self.server_info()
            model = resolve_model(info, call.model, self.model)
            request = ocr_parts.plan_request(ocr_preset(info, model, options.preset), options)
            await self._ensure_ngram_processor(request, info, model, call.extra_headers)
            progress = Progress(total, enabled=show_progress, description="OCR pages")
            try:
                pages = await self._ocr_pages(
                    rendered, request, plan, call, quality, model=model, progress=progress, source=source
                )
            finally:
                progress.close()
        finally:
            await async_offload(ocr_parts.close_pages, rendered)  # the PDF, when a page failed half-way
        document = ladder.check_document(quality, ocr_parts.merge_pages(pages))
        if document.truncated_pages:  # stacklevel: _ocr_pdf < ocr_pdf < the caller
            message = ocr_parts.truncated_pages_message(document.truncated_pages)
            warnings.warn(message, ocr_parts.OCRTruncatedWarning, stacklevel=3)
        return document

    async def _ocr_pages(
        self,
        rendered: Iterator[tuple[int, Any]],
        request: ocr_parts.OCRRequest,
        plan: ocr_parts.PDFPlan,
        call: CallOptions,
        quality: PageQuality | None,
        *,
        model: str | None,
        progress: Progress,
        source: Any,
    ) -> list[OCRPage]:
        """Render and encode ``plan.wave`` pages at a time (in a worker thread), then OCR them."""
        pages: list[OCRPage] = []
        while batch := await async_offload(ocr_parts.prepare_pages, rendered, plan.wave, request):
            pages += await self._ocr_ladder(
                batch,
                request,
                call,
                quality,
                model=model,
                concurrency=plan.concurrency,
                source=source,
                progress=progress,
            )
        return pages

    async def _ocr_ladder(
        self,
        batch: Sequence[tuple[int, PreparedImage]],
        request: ocr_parts.OCRRequest,
        call: CallOptions,
        quality: PageQuality | None,
        *,
        model: str | None,
        concurrency: int,
        source: Any = None,
        progress: Progress | None = None,
    ) -> list[OCRPage]:
        """OCR each ``(page number, image)`` through the page-quality ladder: each round sends the next
        try of every page still on it at once; a failed page of the PDF ``source`` falls back to its text.
        ``progress`` advances as each page is kept or fails.
        """
        check = FORMATS[request.output].check
        states = [ladder.PageLadder() for _ in batch]
        last: list[OCRResult | None] = [None] * len(batch)
        spent = [Usage() for _ in batch]
        while pending := [
            (index, attempt)
            for index, state in enumerate(states)
            if (attempt := ladder.next_try(quality, state)) is not None
        ]:
            images = [batch[index][1] for index, _ in pending]
            if any(attempt.rotation for _, attempt in pending):
                images = await async_offload(
                    lambda: [
                        ocr_parts.round_sides(
                            ladder.rotated(batch[i][1], t.rotation, request.max_side), request.side_multiple
                        )
                        for i, t in pending
                    ]
                )
            requests = []
            for image, (_, attempt) in zip(images, pending, strict=True):
                sent = ocr_parts.page_request(image.data_url, request, model, call)
                requests.append(sent if quality is None else ladder.try_request(sent, attempt.temperature))
            responses = await self._transport.send_all(requests, concurrency)
            for image, (index, _), response in zip(images, pending, responses, strict=True):
                answer = ladder.refusal(response)
                result = None
                if answer is None:
                    result = ocr_parts.parse_response(
                        response,
                        image,
                        request.prompt,
                        preset=request.preset,
                        output=request.output,
                        warn=False,
                    )
                    answer = ladder.answer_of(result, check)
                    spent[index] = spent[index] + result.usage
                last[index] = result
                states[index] = ladder.step(quality, states[index], answer)
                if progress is not None and states[index].outcome != "pending":
                    progress.advance(1)
        fallback = quality is not None and quality.text_layer_fallback and source is not None
        pages = []
        for (number, _), state, result, used in zip(batch, states, last, spent, strict=True):
            text = None
            if state.outcome == "failed" and fallback:
                text = await async_offload(pdf.text_layer, source, number)
            page = ladder.page_of(
                number, state, result, text, model=model or "", prompt=request.prompt, spent=used
            )
            pages.append(page)
        return pages

    async def _ocr_page(
        self,
        image: ImageInput,
        options: ocr_parts.OCRParams,
        call: CallOptions,
        quality: PageQuality | None,
        *,
        source: Any = None,
        page: int = 1,
    ) -> OCRPage:
        """OCR one image (page ``page`` of the PDF ``source``, for its text) through the page-quality
        ladder: what ``ocr_dir`` and Ray's ``OCR`` send for each image and page."""
        info = await self.server_info()
        model = resolve_model(info, call.model, self.model)
        request = ocr_parts.plan_request(ocr_preset(info, model, options.preset), options)
        loaded = await self._load_image(image, request.max_side, fetch_urls=True, downscale=True)
        prepared = await async_offload(ocr_parts.fit_image, loaded, request, downscale=True)
        assert isinstance(prepared, PreparedImage)  # fetch_urls=True: a URL is fetched
        await self._ensure_ngram_processor(request, info, model, call.extra_headers)
        pages = await self._ocr_ladder(
            [(page, prepared)], request, call, quality, model=model, concurrency=1, source=source
        )
        self._counted(ocr_parts.merge_pages(pages))  # every try's tokens
        return pages[0]

    async def check_ngram_processor(self, *, refresh: bool = False, model: str | None = None) -> bool | None:
        """Whether the server runs DeepSeek-OCR's n-gram logits processor (cached per client).

        One text-only request with ``vllm_xargs {"ngram_size": 0}`` and ``max_tokens: 1``: 400 means the
        processor is loaded (True); 200 means the server ignores ``vllm_xargs`` (False: start it with
        ``--logits-processors vllm.model_executor.models.deepseek_ocr:NGramPerReqLogitsProcessor``);
        another 400 is inconclusive (None).

        Raises:
            EndpointNotServed: the server's model does not serve chat completions.

        Examples:
            >>> await client.check_ngram_processor()
            True
        """
        return await self._ngram_processor(model, None, refresh=refresh)

    async def _ngram_processor(
        self, model: str | None, extra_headers: Mapping[str, str] | None, *, refresh: bool = False
    ) -> bool | None:
        """The n-gram processor check's answer, checked once per model and kept in the server state."""
        state = await self._current_state()
        assert state.info is not None  # _current_state read it
        model = resolve_model(state.info, model, self.model)
        key = model or ""
        if refresh or not state.knows(NGRAM_PROCESSOR, key):
            async with self._discovery_lock:
                state = self._server_state
                if refresh or not state.knows(NGRAM_PROCESSOR, key):
                    found = await discovery.check_ngram_processor(
                        self._transport, model, extra_headers=extra_headers
                    )
                    self._learn(state, NGRAM_PROCESSOR, key, found)
                    return found
        return state.get(NGRAM_PROCESSOR, key)
